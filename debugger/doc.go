// Package debugger builds forward and inverse state trees from traces and samples neural-debugger
// trajectories with a stochastic action policy.
package debugger
