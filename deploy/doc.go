// Package deploy holds no Go code for ndtrace itself: it holds the worker's container image
// (Dockerfile), the Helm chart (helm/ndtrace) and a compose file for a local cluster, and the
// tests that check them offline.
//
// The tests render the chart with helm (helm lint --strict, helm template) and validate every
// rendered manifest with kubeconform against JSON schemas generated, inside the test, from the
// Kubernetes OpenAPI document shipped in the k8s.io/kubernetes module and from the
// prometheus-operator ServiceMonitor CRD; both modules must already be in the Go module cache
// (deploy/README.md, "CI set-up lines"), so no test reaches the network. They load compose.yaml
// with compose-go's command (installed as compose-spec) and check it and the Dockerfile by
// parsing them.
//
// Tools are looked up in ../bin, then on PATH. A missing tool or schema module skips its test,
// except when CI is set, where it fails.
package deploy
