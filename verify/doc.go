// Package verify certifies a version of a dataset (`ndtrace verify`, docs/verify.md): it draws a
// reproducible, stratified sample of its rows, re-executes each row's item in a fresh sandbox,
// rebuilds the row's trajectory with its seed and policy and compares text and input_ids, replays
// the row's actions on Python's own debugger, and writes the certificate (verify.json).
package verify
