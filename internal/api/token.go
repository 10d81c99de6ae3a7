package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/infrakit/infrakit/sdk/atomicfile"
)

// TokenFileName is where watch keeps its generated token, under the
// working directory.
var TokenFileName = filepath.Join(".infrakit", "api-token")

// TokenEnv gives the token when no -token-file is.
const TokenEnv = "INFRAKIT_TOKEN"

// minTokenLen keeps a token from being guessable by being short.
const minTokenLen = 16

// TokenSource says where the token comes from.
type TokenSource struct {
	// File is -token-file; Env the value of INFRAKIT_TOKEN; WorkDir where
	// TokenFileName is made when neither is given.
	File, Env, WorkDir string
}

// LoadToken returns the token and where it came from (a path, or
// INFRAKIT_TOKEN). A token file named by -token-file must exist; the
// working directory's is created, 0600 and random, on first use. A token
// file others can read is refused: the token is the only key to the API.
func LoadToken(src TokenSource) (token, from string, err error) {
	switch {
	case src.File != "":
		token, err = readToken(src.File)
		return token, src.File, err
	case src.Env != "":
		token = strings.TrimSpace(src.Env)
		if len(token) < minTokenLen {
			return "", TokenEnv, fmt.Errorf("%s is %d characters long: give a token of at least %d", TokenEnv, len(token), minTokenLen)
		}
		return token, TokenEnv, nil
	}
	path := filepath.Join(src.WorkDir, TokenFileName)
	token, err = readToken(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return token, path, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", path, fmt.Errorf("generate the API token: %w", err)
	}
	token = hex.EncodeToString(b)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", path, fmt.Errorf("generate the API token: %w", err)
	}
	// Create, not overwrite: two watch processes starting at once keep
	// one token between them.
	if err := atomicfile.Create(path, []byte(token+"\n"), 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			token, err = readToken(path)
			return token, path, err
		}
		return "", path, fmt.Errorf("write the API token: %w", err)
	}
	return token, path, nil
}

func readToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("API token: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("API token: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("API token %s: mode %04o lets others than its owner read it: chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	if fi.Size() > 4096 {
		return "", fmt.Errorf("API token %s: %d bytes is no token", path, fi.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("API token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < minTokenLen {
		return "", fmt.Errorf("API token %s: %d characters long: give a token of at least %d", path, len(token), minTokenLen)
	}
	return token, nil
}
