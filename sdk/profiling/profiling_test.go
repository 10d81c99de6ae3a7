package profiling

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartWritesBothProfiles(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{EnvCPU: filepath.Join(dir, "cpu.pprof"), EnvMem: filepath.Join(dir, "mem.pprof")}
	stop, err := Start(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	sink := 0
	for i := range 100000 {
		sink += len(strings.Repeat("x", i%64))
	}
	_ = sink
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cpu.pprof", "mem.pprof"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		// pprof writes gzipped protocol buffers.
		if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) || len(b) < 64 {
			t.Errorf("%s: %d bytes, not a gzipped profile", name, len(b))
		}
	}
}

func TestStartWithoutEnvironmentDoesNothing(t *testing.T) {
	stop, err := Start(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestStartReportsAnUnwritablePath(t *testing.T) {
	_, err := Start(func(k string) string {
		if k == EnvCPU {
			return filepath.Join(t.TempDir(), "missing", "cpu.pprof")
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), EnvCPU) {
		t.Fatalf("err = %v, want one naming %s", err, EnvCPU)
	}
}
