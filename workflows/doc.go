// Package workflows holds ndtrace's Temporal workflows. Workflow code here is deterministic: it only
// orchestrates; every side effect is an activity (package activities).
package workflows
