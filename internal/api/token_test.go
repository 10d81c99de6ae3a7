package api

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The working directory's token is made once, 0600, and read back the
// same; a token file others can read, or a short token, is refused.
func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	token, from, err := LoadToken(TokenSource{WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if from != filepath.Join(dir, TokenFileName) || len(token) != 64 {
		t.Fatalf("token %q from %s", token, from)
	}
	fi, err := os.Stat(from)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file %v, %v: want mode 0600", fi.Mode(), err)
	}
	again, _, err := LoadToken(TokenSource{WorkDir: dir})
	if err != nil || again != token {
		t.Fatalf("second start read %q, %v; want the first token", again, err)
	}

	if got, from, err := LoadToken(TokenSource{Env: "  " + testToken + "\n", WorkDir: dir}); err != nil || got != testToken || from != TokenEnv {
		t.Fatalf("from the environment: %q %s %v", got, from, err)
	}
	if _, _, err := LoadToken(TokenSource{Env: "short"}); err == nil || !strings.Contains(err.Error(), "at least") {
		t.Fatalf("a short token: %v", err)
	}

	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte(testToken+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadToken(TokenSource{File: file, Env: "ignored-ignored-ignored"}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a token file others can read: %v", err)
	}
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, from, err := LoadToken(TokenSource{File: file, Env: "ignored-ignored-ignored"}); err != nil || got != testToken || from != file {
		t.Fatalf("-token-file before INFRAKIT_TOKEN: %q %s %v", got, from, err)
	}
	if _, _, err := LoadToken(TokenSource{File: filepath.Join(dir, "missing")}); err == nil {
		t.Fatal("a -token-file that does not exist is made up")
	}
}
