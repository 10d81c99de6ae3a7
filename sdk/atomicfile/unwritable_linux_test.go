package atomicfile

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// makeImmutable sets the immutable attribute of dir (chattr +i) until the
// test ends, or skips the test where the file system or the capabilities
// do not allow it.
func makeImmutable(t *testing.T, dir string) {
	t.Helper()
	if err := setImmutable(dir, true); err != nil {
		t.Skipf("cannot make %s unwritable for this user: %v", dir, err)
	}
	// Registered after makeUnwritable's chmod, so it runs first: an
	// immutable directory refuses the chmod and TempDir's removal.
	t.Cleanup(func() {
		if err := setImmutable(dir, false); err != nil {
			t.Errorf("clear the immutable attribute of %s: %v", dir, err)
		}
	})
}

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h, which x/sys/unix lacks.
const fsImmutableFL = 0x10

// setImmutable sets or clears FS_IMMUTABLE_FL.
func setImmutable(dir string, on bool) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetInt(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return err
	}
	if on {
		flags |= fsImmutableFL
	} else {
		flags &^= fsImmutableFL
	}
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, flags)
}
