//go:build !unix

package e2ee

import "time"

// processCPU is not measured here.
func processCPU() (time.Duration, bool) { return 0, false }
