package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/syncbuf"
)

// DefaultAnswerTimeout is how long a command waits at its question (an
// apply's approval) before it takes the silence for "no".
const DefaultAnswerTimeout = 5 * time.Minute

// Reply is what a run answers: its exit code and output, the files it
// wrote (a saved plan), or the question it waits at.
type Reply struct {
	ExitCode int               `json:"exit_code"`
	Stdout   string            `json:"stdout"`
	Stderr   string            `json:"stderr"`
	Files    map[string][]byte `json:"files,omitempty"`
	// Question and Session are set while the command waits for an
	// answer (POST /v1/cli/SESSION); ExitCode means nothing then.
	Question string `json:"question,omitempty"`
	Session  string `json:"session,omitempty"`
	// Diagnostics are those the command printed, as JSON.
	Diagnostics []config.JSONDiagnostic `json:"diagnostics,omitempty"`
}

// session is one command running in the watch process. The sessions
// type owns its goroutine: it ends when the command returns, which the
// session's context (the server's, bounded by the verb timeout) ensures.
type session struct {
	id       string
	root     string            // removed when the command is done
	uploaded map[string][]byte // by path under the client directory
	stdout   syncbuf.Buffer
	stderr   syncbuf.Buffer
	cancel   context.CancelFunc

	questions chan string
	answers   chan string
	done      chan struct{}
	code      int
	files     map[string][]byte

	diagMu sync.Mutex
	diags  []config.JSONDiagnostic
}

// sessions are the runs in flight.
type sessions struct {
	runner  Runner
	timeout time.Duration // of a run
	answer  time.Duration // of a question
	ctx     context.Context
	wg      sync.WaitGroup

	mu  sync.Mutex
	all map[string]*session
}

func newSessions(ctx context.Context, r Runner, timeout time.Duration) *sessions {
	return &sessions{runner: r, timeout: timeout, answer: DefaultAnswerTimeout, ctx: ctx, all: map[string]*session{}}
}

// start writes the client's files into a directory of their own (named
// dirName inside it, as the client's directory is, which names a stack
// without a stack block) and runs c there.
func (ss *sessions) start(c Command, files map[string][]byte, dirName string) (*session, error) {
	root, err := os.MkdirTemp("", "infrakit-api-")
	if err != nil {
		return nil, fmt.Errorf("client files: %w", err)
	}
	dir := filepath.Join(root, cleanDirName(dirName))
	s := &session{id: newID(), root: root, uploaded: map[string][]byte{},
		questions: make(chan string), answers: make(chan string), done: make(chan struct{})}
	if err := s.write(dir, files); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	c.ClientDir = dir
	ctx, cancel := context.WithTimeout(ss.ctx, ss.timeout)
	s.cancel = cancel
	ss.mu.Lock()
	ss.all[s.id] = s
	ss.mu.Unlock()
	ss.wg.Add(1)
	go func() {
		defer ss.wg.Done()
		defer cancel()
		s.code = ss.runner.Run(ctx, c, IO{Stdout: &s.stdout, Stderr: &s.stderr,
			Ask:         func(q string) (string, error) { return s.ask(ctx, q, ss.answer) },
			Diagnostics: s.addDiagnostics,
		})
		s.files = s.written(dir)
		os.RemoveAll(root)
		ss.mu.Lock()
		delete(ss.all, s.id)
		ss.mu.Unlock()
		close(s.done)
	}()
	return s, nil
}

func cleanDirName(name string) string {
	name = filepath.Base(filepath.Clean("/" + name))
	if name == "/" || name == "." || name == "" {
		return "client"
	}
	return name
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand does not fail on Linux
	return hex.EncodeToString(b)
}

// write places the client's files under dir: every name, absolute or
// relative, lives below it (Meta.ClientPath resolves names the same way);
// a name that climbs out of it is refused.
func (s *session) write(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("client files: %w", err)
	}
	for name, data := range files {
		path := filepath.Join(dir, name)
		if name == "" || !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			return fmt.Errorf("client file %q: a file must be named below the client's directory", name)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("client file %q: %w", name, err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("client file %q: %w", name, err)
		}
		s.uploaded[path] = data
	}
	return nil
}

// written are the files the command made or changed under dir, by their
// names relative to it (a saved plan).
func (s *session) written(dir string) map[string][]byte {
	out := map[string][]byte{}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		if old, ok := s.uploaded[path]; ok && string(old) == string(data) {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		out[rel] = data
		return nil
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// ask hands q to whoever waits on the session and waits for the answer.
func (s *session) ask(ctx context.Context, q string, within time.Duration) (string, error) {
	select {
	case s.questions <- q:
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case a := <-s.answers:
		return a, nil
	case <-t.C:
		return "", fmt.Errorf("no answer within %s", within)
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// wait returns the output so far once the command ends or asks. When ctx
// ends first (the client went away), the command is interrupted, as the
// CLI is by Ctrl-C, and wait returns once it has ended.
func (s *session) wait(ctx context.Context) Reply {
	select {
	case q := <-s.questions:
		return Reply{Stdout: s.stdout.Take(), Stderr: s.stderr.Take(), Question: q, Session: s.id}
	case <-s.done:
		return Reply{ExitCode: s.code, Stdout: s.stdout.Take(), Stderr: s.stderr.Take(), Files: s.files, Diagnostics: s.takeDiagnostics()}
	case <-ctx.Done():
		s.cancel()
		<-s.done
		return Reply{ExitCode: 1, Stdout: s.stdout.Take(), Stderr: s.stderr.Take()}
	}
}

func (s *session) addDiagnostics(d []config.JSONDiagnostic) {
	s.diagMu.Lock()
	defer s.diagMu.Unlock()
	s.diags = append(s.diags, d...)
}

func (s *session) takeDiagnostics() []config.JSONDiagnostic {
	s.diagMu.Lock()
	defer s.diagMu.Unlock()
	d := s.diags
	s.diags = nil
	return d
}

// errNoSession: the session ended, or never was.
var errNoSession = errors.New("no such session: it ended, or its question was not answered in time")

// resume answers session id's question and waits as wait does.
func (ss *sessions) resume(ctx context.Context, id, answer string) (Reply, error) {
	ss.mu.Lock()
	s := ss.all[id]
	ss.mu.Unlock()
	if s == nil {
		return Reply{}, errNoSession
	}
	select {
	case s.answers <- answer:
	case <-s.done:
		return Reply{}, errNoSession
	case <-ctx.Done():
		return Reply{}, ctx.Err()
	}
	return s.wait(ctx), nil
}

// close interrupts every run and waits for them to end.
func (ss *sessions) close() {
	ss.mu.Lock()
	for _, s := range ss.all {
		s.cancel()
	}
	ss.mu.Unlock()
	ss.wg.Wait()
}
