package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// askingRunner is a command that reads its client's file, asks, and saves
// a file: what apply without -auto-approve and plan -out do, in a few
// lines, to test the session protocol (the real commands run in the e2e
// tests against a watch).
type askingRunner struct{}

func (askingRunner) Run(ctx context.Context, c Command, cio IO) int {
	in, err := os.ReadFile(filepath.Join(c.ClientDir, "main.hcl"))
	if err != nil {
		fmt.Fprintln(cio.Stderr, err)
		return 1
	}
	fmt.Fprintf(cio.Stdout, "%s %v read %q in %s\n", strings.Join(c.Words, " "), c.Args, in, filepath.Base(c.ClientDir))
	answer, err := cio.Ask("Proceed?")
	if err != nil {
		fmt.Fprintln(cio.Stderr, "no answer:", err)
		return 1
	}
	if answer != "yes" {
		fmt.Fprintln(cio.Stderr, "cancelled")
		return 1
	}
	if err := os.WriteFile(filepath.Join(c.ClientDir, "out.plan"), []byte("saved"), 0o600); err != nil {
		return 1
	}
	fmt.Fprintln(cio.Stdout, "done")
	return 0
}

func post(t *testing.T, h http.Handler, path string, body any) (int, Reply) {
	t.Helper()
	b, _ := json.Marshal(body)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(b)))
	var rep Reply
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
	}
	return rec.Code, rep
}

// A command that asks answers with its question and a session; the
// answer resumes it; the files it wrote come back; its directory goes.
func TestCLISessionAsksAndResumes(t *testing.T) {
	s := New(Options{Runner: askingRunner{}})
	defer s.Close()
	h := s.Handler()
	code, rep := post(t, h, "/v1/cli", CLIRequest{Command: "apply", Args: []string{"-x"}, Dir: "mystack",
		Files: map[string][]byte{"main.hcl": []byte("stack")}})
	if code != 200 || rep.Question != "Proceed?" || rep.Session == "" {
		t.Fatalf("%d %+v: want the question", code, rep)
	}
	if rep.Stdout != "apply [-x] read \"stack\" in mystack\n" {
		t.Fatalf("stdout before the question: %q", rep.Stdout)
	}
	code, rep = post(t, h, "/v1/cli/"+rep.Session, AnswerRequest{Answer: "yes"})
	if code != 200 || rep.ExitCode != 0 || rep.Stdout != "done\n" || string(rep.Files["out.plan"]) != "saved" || len(rep.Files) != 1 {
		t.Fatalf("%d %+v: want done and the saved file alone", code, rep)
	}
	if code, _ := post(t, h, "/v1/cli/"+rep.Session, AnswerRequest{Answer: "yes"}); code != http.StatusNotFound {
		t.Fatalf("an ended session answered %d, want 404", code)
	}
}

// Only the object commands run; a file named out of the client's
// directory is refused before anything runs.
func TestCLIRefuses(t *testing.T) {
	s := New(Options{Runner: askingRunner{}})
	defer s.Close()
	h := s.Handler()
	if code, _ := post(t, h, "/v1/cli", CLIRequest{Command: "init"}); code != http.StatusBadRequest {
		t.Fatalf("init: %d, want 400", code)
	}
	if code, _ := post(t, h, "/v1/cli", CLIRequest{Command: "plan", Files: map[string][]byte{"../x.hcl": nil}}); code != http.StatusBadRequest {
		t.Fatalf("../x.hcl: %d, want 400", code)
	}
	if code, _ := post(t, h, "/v1/cli", CLIRequest{Command: "plan", Env: map[string]string{"PATH": "/"}}); code != http.StatusBadRequest {
		t.Fatalf("PATH in env: %d, want 400", code)
	}
	if code, _ := post(t, h, "/v1/groups/web/scale", map[string]any{"size": -1}); code != http.StatusBadRequest {
		t.Fatalf("size -1: %d, want 400", code)
	}
	if code, _ := post(t, h, "/v1/groups/web/scale", map[string]any{"sise": 1}); code != http.StatusBadRequest {
		t.Fatalf("an unknown field: %d, want 400", code)
	}
}

// An absolute name lives under the client's directory too, as
// Meta.ClientPath resolves it.
func TestClientFilesStayInTheirDirectory(t *testing.T) {
	dir := t.TempDir()
	s := &session{uploaded: map[string][]byte{}}
	if err := s.write(dir, map[string][]byte{"/etc/passwd": []byte("x"), "a/b.hcl": []byte("y")}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"etc/passwd", "a/b.hcl"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if s.written(dir) != nil {
		t.Errorf("unchanged uploads came back: %v", s.written(dir))
	}
}

// Close interrupts a command waiting at its question.
func TestCloseEndsWaitingSessions(t *testing.T) {
	s := New(Options{Runner: askingRunner{}})
	code, rep := post(t, s.Handler(), "/v1/cli", CLIRequest{Command: "apply", Files: map[string][]byte{"main.hcl": nil}})
	if code != 200 || rep.Session == "" {
		t.Fatalf("%d %+v", code, rep)
	}
	s.Close() // returns once the run has ended; goleak checks the rest
}
