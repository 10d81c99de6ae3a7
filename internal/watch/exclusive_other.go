//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package watch

import (
	"errors"
	"os"
)

func tryLock(*os.File) (bool, error) { return false, errors.ErrUnsupported }

func unlock(*os.File) error { return errors.ErrUnsupported }
