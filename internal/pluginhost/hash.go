package pluginhost

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
)

// hashPrefix marks the only hash scheme the lock file knows.
const hashPrefix = "sha256:"

// Hash is a binary's checksum as the lock file writes it: "sha256:<hex>".
type Hash string

// hashOf formats a sha256 sum as a Hash.
func hashOf(sum []byte) Hash { return Hash(hashPrefix + hex.EncodeToString(sum)) }

// ParseHash checks that s is "sha256:" followed by 64 hex digits.
func ParseHash(s string) (Hash, error) {
	if _, err := Hash(s).sum(); err != nil {
		return "", err
	}
	return Hash(s), nil
}

// sum returns the raw sha256 bytes of h.
func (h Hash) sum() ([]byte, error) {
	hexPart, ok := strings.CutPrefix(string(h), hashPrefix)
	if !ok {
		return nil, fmt.Errorf("hash %q: want %q followed by 64 hex digits", h, hashPrefix)
	}
	b, err := hex.DecodeString(hexPart)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("hash %q: want %q followed by 64 hex digits", h, hashPrefix)
	}
	return b, nil
}

// HashFile returns the sha256 of a file.
func HashFile(path string) (Hash, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hashOf(h.Sum(nil)), nil
}
