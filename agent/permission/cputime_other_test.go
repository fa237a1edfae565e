//go:build !unix

package permission

import "time"

func processCPU() time.Duration { return 0 }
