// Package crawl finds traceable Python: function-level corpora (functions with inputs) and
// repository-level sources (git repositories with test suites).
package crawl
