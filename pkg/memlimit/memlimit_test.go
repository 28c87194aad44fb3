package memlimit

import (
	"runtime/debug"
	"testing"
	"testing/fstest"
)

func TestContainerLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		files fstest.MapFS
		want  int64
		ok    bool
		fails bool
	}{
		{name: "cgroup v2 with a limit", files: fstest.MapFS{cgroupV2Max: {Data: []byte("268435456\n")}}, want: 256 << 20, ok: true},
		{name: "cgroup v2 without one", files: fstest.MapFS{cgroupV2Max: {Data: []byte("max\n")}}},
		{name: "cgroup v1 with a limit", files: fstest.MapFS{cgroupV1Max: {Data: []byte("536870912\n")}}, want: 512 << 20, ok: true},
		{name: "cgroup v1 without one", files: fstest.MapFS{cgroupV1Max: {Data: []byte("9223372036854771712\n")}}},
		{name: "v2 wins over v1", files: fstest.MapFS{cgroupV2Max: {Data: []byte("1048576")}, cgroupV1Max: {Data: []byte("2097152")}}, want: 1 << 20, ok: true},
		{name: "no cgroup files", files: fstest.MapFS{}},
		{name: "garbage", files: fstest.MapFS{cgroupV2Max: {Data: []byte("lots")}}, fails: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, ok, err := ContainerLimit(c.files)
			if (err != nil) != c.fails || got != c.want || ok != c.ok {
				t.Fatalf("ContainerLimit = %d, %v, %v; want %d, %v, error %v", got, ok, err, c.want, c.ok, c.fails)
			}
		})
	}
}

// Not parallel: the soft limit is the process's.
func TestApplySetsNinetyPercentOfTheContainerLimitUnlessGOMEMLIMITIsSet(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	root := fstest.MapFS{cgroupV2Max: {Data: []byte("268435456\n")}}

	a, restore, err := Apply(false, root)
	if err != nil {
		t.Fatal(err)
	}
	container := int64(256 << 20)
	want := int64(float64(container) * Ratio)
	if a.Container != 256<<20 || a.Limit != want || debug.SetMemoryLimit(-1) != want {
		t.Fatalf("applied %+v, runtime limit %d; want %d", a, debug.SetMemoryLimit(-1), want)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("restore left %d, want %d", got, before)
	}

	a, restore, err = Apply(true, root)
	if err != nil {
		t.Fatal(err)
	}
	restore()
	if a != (Applied{}) || debug.SetMemoryLimit(-1) != before {
		t.Fatalf("GOMEMLIMIT set by the operator must win: applied %+v", a)
	}

	a, restore, err = Apply(false, fstest.MapFS{})
	if err != nil {
		t.Fatal(err)
	}
	restore()
	if a != (Applied{}) || debug.SetMemoryLimit(-1) != before {
		t.Fatalf("no container limit: nothing is set, applied %+v", a)
	}
}
