package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const testToken = "0123456789abcdef0123456789abcdef"

// Writes always need the token, reads unless PublicRead; the cookie
// authenticates reads only; every refusal is a 401 that the next handler
// never sees, counted by reason.
func TestAuth(t *testing.T) {
	for _, tc := range []struct {
		name       string
		publicRead bool
		method     string
		path, body string // default: /v1/groups, no body
		header     string
		cookie     string
		want       int
		reason     string // counted, for a refusal
	}{
		{name: "read without token", method: "GET", want: 401, reason: "missing"},
		{name: "read with token", method: "GET", header: "Bearer " + testToken, want: 200},
		{name: "bearer is case-insensitive", method: "GET", header: "bearer " + testToken, want: 200},
		{name: "read with wrong token", method: "GET", header: "Bearer nope", want: 401, reason: "wrong"},
		{name: "not a bearer", method: "GET", header: "Basic " + testToken, want: 401, reason: "wrong"},
		{name: "read with cookie", method: "GET", cookie: testToken, want: 200},
		{name: "write with cookie", method: "POST", cookie: testToken, want: 401, reason: "missing"},
		{name: "write with token", method: "POST", header: "Bearer " + testToken, want: 200},
		{name: "public read", publicRead: true, method: "GET", want: 200},
		{name: "public read, head", publicRead: true, method: "HEAD", want: 200},
		{name: "public read, write without token", publicRead: true, method: "POST", want: 401, reason: "missing"},
		{name: "public read, write with wrong token", publicRead: true, method: "POST", header: "Bearer x", want: 401, reason: "wrong"},
		{name: "public read, remote CLI read", publicRead: true, method: "POST", path: "/v1/cli", body: `{"command": "group ls", "args": ["-json"]}`, want: 200},
		{name: "public read, remote CLI write", publicRead: true, method: "POST", path: "/v1/cli", body: `{"command": "group scale", "args": ["web", "3"]}`, want: 401, reason: "missing"},
		{name: "public read, remote CLI answer", publicRead: true, method: "POST", path: "/v1/cli/s1", body: `{"answer": "yes"}`, want: 401, reason: "missing"},
		{name: "public read, remote CLI bad body", publicRead: true, method: "POST", path: "/v1/cli", body: `{"command": "group ls"`, want: 401, reason: "missing"},
		{name: "remote CLI read needs the token", method: "POST", path: "/v1/cli", body: `{"command": "group ls"}`, want: 401, reason: "missing"},
		{name: "remote CLI read with cookie", method: "POST", path: "/v1/cli", body: `{"command": "group ls"}`, cookie: testToken, want: 401, reason: "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			a := NewAuth(testToken, tc.publicRead, nil, reg)
			reached := false
			h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached = true
				// The body the guard read is the handler's still.
				if b, _ := io.ReadAll(r.Body); string(b) != tc.body {
					t.Errorf("the handler reads %q, want %q", b, tc.body)
				}
			}))
			path := tc.path
			if path == "" {
				path = "/v1/groups"
			}
			req := httptest.NewRequest(tc.method, path, strings.NewReader(tc.body))
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			if tc.cookie != "" {
				req.AddCookie(&http.Cookie{Name: CookieName, Value: tc.cookie})
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("%d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if reached != (tc.want == 200) {
				t.Fatalf("the handler reached: %v, answer %d", reached, rec.Code)
			}
			for _, reason := range []string{"missing", "wrong"} {
				want := 0.0
				if reason == tc.reason {
					want = 1
				}
				if got := testutil.ToFloat64(a.failures.WithLabelValues(reason)); got != want {
					t.Errorf("failures{reason=%q} = %v, want %v", reason, got, want)
				}
			}
			if tc.want == 401 {
				if !strings.Contains(rec.Body.String(), `"summary"`) || rec.Header().Get("WWW-Authenticate") == "" {
					t.Errorf("refusal without a diagnostic or WWW-Authenticate: %s %v", rec.Body, rec.Header())
				}
			}
		})
	}
}

// Only loopback is served without TLS.
func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		listen string
		tls    bool
		ok     bool
	}{
		{"127.0.0.1:24864", false, true},
		{"127.0.0.2:0", false, true},
		{"[::1]:24864", false, true},
		{"localhost:24864", false, true},
		{"0.0.0.0:24864", false, false},
		{":24864", false, false},
		{"10.0.0.5:24864", false, false},
		{"example.com:24864", false, false},
		{"0.0.0.0:24864", true, true},
		{"nonsense", false, false},
	} {
		err := CheckListen(tc.listen, tc.tls)
		if (err == nil) != tc.ok {
			t.Errorf("CheckListen(%q, tls=%v) = %v, want ok=%v", tc.listen, tc.tls, err, tc.ok)
		}
		if err != nil && tc.listen != "nonsense" && !strings.Contains(err.Error(), "-tls-cert") {
			t.Errorf("the refusal does not say what to do: %v", err)
		}
	}
}

// The remote CLI's public reads are remote commands.
func TestReadCommandsAreCommands(t *testing.T) {
	for _, c := range ReadCommands {
		if !slices.Contains(Commands, c) {
			t.Errorf("%q is a read command but no remote command", c)
		}
	}
}
