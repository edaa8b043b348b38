//go:build !unix

package crawl

import "os/exec"

// killProcessGroup does nothing here: cancelling the context kills git alone.
func killProcessGroup(*exec.Cmd) {}

// oNoFollow is not available here.
const oNoFollow = 0

// nameTooLong is not told apart here.
func nameTooLong(error) bool { return false }
