package remote

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeWatch is the watch's side of POST /v1/cli for one test: it checks
// the token and hands each request to handle.
func fakeWatch(t *testing.T, token string, handle func(path string, body map[string]json.RawMessage) (int, any)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error": {"summary": "Wrong API token", "detail": "not this watch's"}}`))
			return
		}
		var body map[string]json.RawMessage
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&body) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		code, v := handle(r.URL.Path, body)
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newClient(t *testing.T, addr, token, ca string) *Client {
	t.Helper()
	c, err := New(addr, token, ca)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.http.CloseIdleConnections)
	return c
}

func TestRunSendsTheRequestAndReturnsTheAnswer(t *testing.T) {
	var got Request
	srv := fakeWatch(t, "tok", func(path string, body map[string]json.RawMessage) (int, any) {
		b, _ := json.Marshal(body)
		if path != "/v1/cli" || json.Unmarshal(b, &got) != nil {
			return http.StatusNotFound, map[string]any{"error": map[string]string{"summary": "No such endpoint"}}
		}
		// The files travel as base64, as []byte does in JSON.
		if string(body["files"]) != `{"x.hcl":"c3RhY2sge30="}` {
			return http.StatusBadRequest, map[string]any{"error": map[string]string{"summary": "files", "detail": string(body["files"])}}
		}
		return http.StatusOK, Response{ExitCode: 2, Stdout: "out\n", Stderr: "err\n", Files: map[string][]byte{"p.plan": {0, 1, 2}}}
	})
	c := newClient(t, srv.URL, "tok", "")
	req := Request{Command: "plan", Args: []string{"-f", "x.hcl", "-out", "p.plan"}, Files: map[string][]byte{"x.hcl": []byte("stack {}")},
		Dir: "work", Env: map[string]string{"INFRAKIT_VAR_size": "3"}, Terminal: true}
	resp, err := c.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ExitCode != 2 || resp.Stdout != "out\n" || resp.Stderr != "err\n" || string(resp.Files["p.plan"]) != "\x00\x01\x02" {
		t.Errorf("answer = %+v", resp)
	}
	if got.Command != "plan" || strings.Join(got.Args, " ") != "-f x.hcl -out p.plan" || got.Dir != "work" ||
		got.Env["INFRAKIT_VAR_size"] != "3" || !got.Terminal {
		t.Errorf("request = %+v", got)
	}
}

func TestAnswerContinuesTheSession(t *testing.T) {
	srv := fakeWatch(t, "tok", func(path string, body map[string]json.RawMessage) (int, any) {
		switch path {
		case "/v1/cli":
			return http.StatusOK, Response{Stdout: "the plan\n", Question: "Do you want to perform these actions?", Session: "s1"}
		case "/v1/cli/s1":
			if string(body["answer"]) != `"yes"` {
				return http.StatusBadRequest, map[string]any{"error": map[string]string{"summary": "answer", "detail": string(body["answer"])}}
			}
			return http.StatusOK, Response{Stdout: "Apply complete!\n"}
		}
		return http.StatusNotFound, map[string]any{"error": map[string]string{"summary": "No such session", "detail": path}}
	})
	c := newClient(t, srv.URL, "tok", "")
	resp, err := c.Run(context.Background(), Request{Command: "apply"})
	if err != nil || resp.Session != "s1" || resp.Question == "" || resp.Stdout != "the plan\n" {
		t.Fatalf("Run = %+v, %v", resp, err)
	}
	resp, err = c.Answer(context.Background(), resp.Session, "yes")
	if err != nil || resp.Stdout != "Apply complete!\n" || resp.Question != "" {
		t.Fatalf("Answer = %+v, %v", resp, err)
	}
	_, err = c.Answer(context.Background(), "gone", "yes")
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusNotFound || e.Summary != "No such session" || e.Detail != "/v1/cli/gone" {
		t.Errorf("an ended session: %v", err)
	}
}

func TestUnauthorized(t *testing.T) {
	srv := fakeWatch(t, "right", func(string, map[string]json.RawMessage) (int, any) {
		return http.StatusOK, Response{}
	})
	for _, tt := range []struct{ token, says string }{
		{"", "wants a token"},
		{"wrong", "refused the token"},
	} {
		_, err := newClient(t, srv.URL, tt.token, "").Run(context.Background(), Request{Command: "group ls"})
		var e *Error
		if !errors.As(err, &e) || !e.Unauthorized() || e.Summary != "Wrong API token (401 Unauthorized)" || !strings.Contains(e.Detail, tt.says) ||
			!strings.Contains(e.Detail, srv.URL) || !strings.Contains(e.Detail, EnvToken) || !strings.Contains(e.Detail, ".infrakit/api-token") {
			t.Errorf("token %q: %v", tt.token, err)
		}
	}
}

func TestErrorsOfTheWatchAndOfTheNetwork(t *testing.T) {
	srv := fakeWatch(t, "tok", func(string, map[string]json.RawMessage) (int, any) {
		return http.StatusBadRequest, map[string]any{"error": map[string]string{"summary": "Not a remote command", "detail": `"init" does not run against a remote watch`}}
	})
	_, err := newClient(t, srv.URL, "tok", "").Run(context.Background(), Request{Command: "init"})
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != 400 || e.Summary != "Not a remote command" || !strings.Contains(e.Detail, `"init"`) {
		t.Errorf("error body: %v", err)
	}

	// An answer that is not the API's.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "teapot", http.StatusTeapot)
	}))
	defer plain.Close()
	_, err = newClient(t, plain.URL, "", "").Run(context.Background(), Request{Command: "show"})
	if !errors.As(err, &e) || e.StatusCode != http.StatusTeapot || !strings.Contains(e.Summary, "418") || e.Detail != "teapot" {
		t.Errorf("plain error: %v", err)
	}

	// Nobody listening.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + l.Addr().String()
	l.Close()
	_, err = newClient(t, addr, "", "").Run(context.Background(), Request{Command: "show"})
	if !errors.As(err, &e) || e.StatusCode != 0 || e.Summary != "Cannot reach the watch" || !strings.Contains(e.Detail, addr) {
		t.Errorf("unreachable: %v", err)
	}
}

func TestBadAddress(t *testing.T) {
	for _, addr := range []string{"", "127.0.0.1:24864", "ftp://h:1", "http://", "http://h:1/v1", "http://u@h:1"} {
		if _, err := New(addr, "", ""); err == nil {
			t.Errorf("New(%q): no error", addr)
		}
	}
	for _, addr := range []string{"http://127.0.0.1:24864", "https://watch.example:8443/", "http://[::1]:1"} {
		if _, err := New(addr, "", ""); err != nil {
			t.Errorf("New(%q): %v", addr, err)
		}
	}
}

func TestTLSWithTheCAOfACACertFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(Response{Stdout: "over TLS\n"})
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := newClient(t, srv.URL, "", ca).Run(context.Background(), Request{Command: "group ls"})
	if err != nil || resp.Stdout != "over TLS\n" {
		t.Errorf("with the CA: %+v, %v", resp, err)
	}
	_, err = newClient(t, srv.URL, "", "").Run(context.Background(), Request{Command: "group ls"})
	var e *Error
	if !errors.As(err, &e) || e.Summary != "The watch's certificate is not trusted" || !strings.Contains(e.Detail, EnvCACert) {
		t.Errorf("without the CA: %v", err)
	}

	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(srv.URL, "", notPEM); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a CA file without a certificate: %v", err)
	}
	if _, err := New(srv.URL, "", filepath.Join(t.TempDir(), "missing.pem")); err == nil || !strings.Contains(err.Error(), EnvCACert) {
		t.Errorf("a missing CA file: %v", err)
	}
	if _, err := NewTLS(srv.URL, "", TLSFiles{Cert: notPEM}); err == nil || !strings.Contains(err.Error(), EnvClientKey) {
		t.Errorf("a client certificate without its key: %v", err)
	}
	if _, err := NewTLS(srv.URL, "", TLSFiles{Cert: notPEM, Key: notPEM}); err == nil || !strings.Contains(err.Error(), EnvClientCert) {
		t.Errorf("a client certificate that is no certificate: %v", err)
	}
}

func TestInterrupted(t *testing.T) {
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so the server notices the client leave
		close(arrived)
		<-r.Context().Done() // the client went away, as after Ctrl-C
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := newClient(t, srv.URL, "", "").Run(ctx, Request{Command: "apply"})
	var e *Error
	if !errors.As(err, &e) || e.Summary != "Interrupted" {
		t.Errorf("interrupted: %v", err)
	}
}
