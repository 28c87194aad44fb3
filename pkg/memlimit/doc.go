// Package memlimit gives the Go runtime a soft memory limit (GOMEMLIMIT)
// from the memory limit of the container it runs in, when the operator has
// not set GOMEMLIMIT.
//
// Without a soft limit the runtime sizes its heap by GOGC alone and knows
// nothing of the container's limit: a heap that grows past it is killed by
// the kernel (OOMKilled) before the collector has tried to keep it below.
// With one, the collector works harder as the heap nears it. The limit
// given is a share (Ratio) of the container's, leaving room for what the
// kernel charges to the container besides the Go runtime's own memory
// (the page cache of files read, socket buffers, memory allocated outside
// Go).
//
// The container's limit is read from the cgroup files a container sees at
// /sys/fs/cgroup: cgroup v2's memory.max, else cgroup v1's
// memory/memory.limit_in_bytes. A container runtime (containerd, Docker,
// CRI-O) mounts the container's own cgroup there, so no walk of
// /proc/self/cgroup is needed. A process outside a container, or in one
// without a limit, finds none and is left as it was.
package memlimit
