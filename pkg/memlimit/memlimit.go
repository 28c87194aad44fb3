package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"
	"strconv"
	"strings"
)

// Ratio is the share of the container's memory limit given to the Go
// runtime as its soft limit: the tenth left over is for memory the runtime
// does not count, and for the time the collector needs to react.
const Ratio = 0.9

// Files a container sees under its root (relative paths, for fs.FS).
const (
	cgroupV2Max = "sys/fs/cgroup/memory.max"
	cgroupV1Max = "sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// unlimitedV1 is where cgroup v1 reports "no limit": the largest multiple
// of the page size in an int64 (9223372036854771712), and anything near it.
const unlimitedV1 = 1 << 62

// ContainerLimit returns the memory limit in bytes of the cgroup mounted at
// root's sys/fs/cgroup (root is os.DirFS("/") in production); ok is false
// when there is none (no cgroup files, or "max").
func ContainerLimit(root fs.FS) (limit int64, ok bool, err error) {
	raw, err := fs.ReadFile(root, cgroupV2Max)
	if errors.Is(err, fs.ErrNotExist) {
		raw, err = fs.ReadFile(root, cgroupV1Max)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read the container's memory limit: %w", err)
	}
	s := strings.TrimSpace(string(raw))
	if s == "max" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false, fmt.Errorf("read the container's memory limit: %q is not a number of bytes", s)
	}
	if n >= unlimitedV1 {
		return 0, false, nil
	}
	return n, true, nil
}

// Applied is what Apply did.
type Applied struct {
	// Container is the container's limit in bytes (0: none found).
	Container int64
	// Limit is the soft limit set (0: none set).
	Limit int64
}

// Apply sets the runtime's soft memory limit to Ratio of the container's
// limit found under root, unless the operator set GOMEMLIMIT (set is true:
// the runtime read it at start and it wins). restore puts back the limit
// there was, for a service run inside a test; it is never nil.
func Apply(set bool, root fs.FS) (a Applied, restore func(), err error) {
	restore = func() {}
	if set {
		return Applied{}, restore, nil
	}
	limit, ok, err := ContainerLimit(root)
	if err != nil || !ok {
		return Applied{}, restore, err
	}
	soft := int64(float64(limit) * Ratio)
	previous := debug.SetMemoryLimit(soft)
	return Applied{Container: limit, Limit: soft}, func() { debug.SetMemoryLimit(previous) }, nil
}
