module github.com/ndtrace/ndtrace

go 1.26
