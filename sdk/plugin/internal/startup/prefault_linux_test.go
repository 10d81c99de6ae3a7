package startup

import (
	"os"
	"slices"
	"syscall"
	"testing"
	"unsafe"
)

func TestParseMaps(t *testing.T) {
	in := []byte(`00400000-0099d000 r-xp 00000000 fe:00 9996118                            /tmp/ik/infrakit-provider-x
0099d000-0103c000 r--p 0059d000 fe:00 9996118                            /tmp/ik/infrakit-provider-x
1b1c1800000-1b1c1c00000 rw-p 00000000 00:00 0 
7f00-7f10 rw-p 00000000 00:00 0                          [stack]
7f20-7f30 r-xp 00000000 fe:00 12 /opt/my dir/bin (deleted)
garbage
zz-7f30 r-xp 00000000 fe:00 12 /x
`)
	got := parseMaps(in)
	want := []mapping{
		{0x400000, 0x99d000, "r-xp", "/tmp/ik/infrakit-provider-x"},
		{0x99d000, 0x103c000, "r--p", "/tmp/ik/infrakit-provider-x"},
		{0x1b1c1800000, 0x1b1c1c00000, "rw-p", ""},
		{0x7f00, 0x7f10, "rw-p", "[stack]"},
		{0x7f20, 0x7f30, "r-xp", "/opt/my dir/bin (deleted)"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("parseMaps:\n got %+v\nwant %+v", got, want)
	}
}

// TestOwnMaps checks that this process's own maps name its executable and
// hold the heap, as Run expects.
func TestOwnMaps(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Skip(err)
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	probe := new([16]byte)
	var code, heap bool
	for _, m := range parseMaps(b) {
		code = code || (m.path == exe && m.perms == "r-xp")
		heap = heap || (m.path == "" && m.perms == "rw-p" && m.contains(uintptr(unsafe.Pointer(probe))))
	}
	if !code || !heap {
		t.Errorf("in /proc/self/maps: executable code mapping %v, heap mapping %v; want both", code, heap)
	}
}

// TestPopulateHeap checks that populateHeap makes the pages after the first
// resident one resident, on a mapping of our own.
func TestPopulateHeap(t *testing.T) {
	page := os.Getpagesize()
	n := 64 * page
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(b)
	b[8*page] = 1 // the "heap" starts at page 8
	start := uintptr(unsafe.Pointer(&b[0]))
	populateHeap(mapping{start: start, end: start + uintptr(n), perms: "rw-p"})

	vec := make([]byte, 64)
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, start, uintptr(n), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	if vec[8]&1 == 0 || vec[63]&1 == 0 {
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, uintptr(page), madvPopulateWrite); e == syscall.EINVAL {
			t.Skip("kernel without MADV_POPULATE_WRITE")
		}
		t.Errorf("pages 8 and 63 not resident after populateHeap: %v", vec)
	}
	if vec[0]&1 != 0 || vec[7]&1 != 0 {
		t.Errorf("pages before the first resident one were populated: %v", vec)
	}
}
