package ui

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The unit tests render the pages from JSON recorded from the real CLI and
// watch on the e2e stack (testdata/*.json: show -json, group describe
// -json, /v1/status, /v1/events ... after one miner was deleted and
// healed). The browser tests (e2e/ui_test.go) run against a real watch.

const token = "s3cret"

// recordedAPI answers the API's paths from testdata, wanting token as the
// bearer token (or the cookie, for reads) unless public, and remembers
// every request it was sent.
type recordedAPI struct {
	t      *testing.T
	public bool
	// files replace the recorded answers of some paths.
	files map[string]string
	// verb answers the POSTs.
	verb string

	mu   sync.Mutex
	seen []*http.Request
	body map[string]string
}

var recorded = map[string]string{
	"/v1/status":                     "status.json",
	"/v1/state":                      "state.json",
	"/v1/events":                     "events.json",
	"/v1/groups":                     "groups.json",
	"/v1/groups/miners":              "group-miners.json",
	"/v1/groups/cattle":              "group-cattle.json",
	"/v1/loadbalancers/lb1/routes":   "routes-lb1.json",
	"/v1/loadbalancers/lb1/backends": "backends-lb1.json",
	"/v1/enrollments/nfs":            "enrollment-nfs.json",
}

func (a *recordedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.seen = append(a.seen, r)
	if a.body == nil {
		a.body = map[string]string{}
	}
	a.body[r.Method+" "+r.URL.Path] = string(b)
	a.mu.Unlock()
	read := r.Method == http.MethodGet
	if !(read && a.public) && r.Header.Get("Authorization") != "Bearer "+token {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error": {"summary": "No API token", "detail": "Send the token."}}`)
		return
	}
	if !read {
		_, _ = io.WriteString(w, a.verb)
		return
	}
	name, ok := recorded[r.URL.Path]
	if f, over := a.files[r.URL.Path]; over {
		name, ok = f, true
	}
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{
			"summary": "No such group", "detail": "group " + r.URL.Path + " is not in the state"}})
		return
	}
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		a.t.Error(err)
	}
	_, _ = w.Write(data)
}

func (a *recordedAPI) requests() []*http.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*http.Request(nil), a.seen...)
}

// clock is a little after the recorded events.
var clock = time.Date(2026, 12, 2, 14, 27, 16, 0, time.UTC)

func newTestUI(t *testing.T, api *recordedAPI) http.Handler {
	api.t = t
	return newSite(api, Options{Version: "9.9.9"}, func() time.Time { return clock }).handler()
}

// visit sends one request to the UI, signed in when signedIn.
func visit(h http.Handler, method, target string, form url.Values, signedIn bool) *httptest.ResponseRecorder {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, target, body)
	r.Host = "127.0.0.1:24864"
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if signedIn {
		r.AddCookie(&http.Cookie{Name: cookieName, Value: token})
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// cell finds the text of the element with data-field=field in the table
// row of data-KEY=VALUE.
func cell(t *testing.T, html, key, value, field string) string {
	t.Helper()
	row := regexp.MustCompile(`(?s)<tr data-` + key + `="` + regexp.QuoteMeta(value) + `">(.*?)</tr>`).FindStringSubmatch(html)
	if row == nil {
		t.Fatalf("no row data-%s=%q in\n%s", key, value, html)
	}
	m := regexp.MustCompile(`data-field="` + field + `">([^<]*)<`).FindStringSubmatch(row[1])
	if m == nil {
		t.Fatalf("no %s in row %s:\n%s", field, value, row[1])
	}
	return m[1]
}

func mustContain(t *testing.T, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q:\n%s", w, body)
		}
	}
}

func TestOverview(t *testing.T) {
	api := &recordedAPI{}
	h := newTestUI(t, api)
	w := visit(h, "GET", "/", nil, true)
	if w.Code != http.StatusOK {
		t.Fatalf("GET / = %d\n%s", w.Code, w.Body)
	}
	page := w.Body.String()
	for _, g := range []struct {
		name            string
		desired, actual string
	}{{"miners", "5", "5"}, {"cattle", "10", "10"}} {
		if got := cell(t, page, "group", g.name, "desired"); got != g.desired {
			t.Errorf("%s desired = %q, want %s", g.name, got, g.desired)
		}
		if got := cell(t, page, "group", g.name, "actual"); got != g.actual {
			t.Errorf("%s actual = %q, want %s", g.name, got, g.actual)
		}
		if got := cell(t, page, "group", g.name, "healthy"); got != g.actual {
			t.Errorf("%s healthy = %q, want %s", g.name, got, g.actual)
		}
	}
	mustContain(t, page,
		`<h1>Stack mystack</h1>`,
		`<a href="/loadbalancers/lb3">lb3</a>`, `<a href="/enrollments/nfs">nfs</a>`,
		`data-last-seq="7"`, `data-live="connecting"`,
		`<span class="kind">replaced</span> <a href="/groups/miners">miners</a> <code>compute-053d8863</code> <span class="reason">(vanished)</span>`,
		`No brake engaged`, `infrakit 9.9.9`, `<meta name="viewport"`)
	// Newest event first.
	if strings.Index(page, `data-seq="7"`) > strings.Index(page, `data-seq="1"`) {
		t.Error("events are not newest first")
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP = %q", csp)
	}

	// The API was read with the cookie's token as the bearer token, and
	// the visitor's Host.
	for _, r := range api.requests() {
		if got := r.Header.Get("Authorization"); got != "Bearer "+token {
			t.Errorf("%s sent Authorization %q", r.URL, got)
		}
		if r.Host != "127.0.0.1:24864" {
			t.Errorf("%s sent Host %q", r.URL, r.Host)
		}
		if r.Header.Get("Accept") != "application/json" {
			t.Errorf("%s sent Accept %q: the events would stream", r.URL, r.Header.Get("Accept"))
		}
	}
}

// In scale-out mode the overview names each group's owner (a group owned
// by another watch process is not observed by this one, and says so), and
// lists the watch processes with what each owns.
func TestOverviewScaleOut(t *testing.T) {
	api := &recordedAPI{files: map[string]string{"/v1/status": "status-scaleout.json"}}
	h := newTestUI(t, api)
	w := visit(h, "GET", "/", nil, true)
	if w.Code != http.StatusOK {
		t.Fatalf("GET / = %d\n%s", w.Code, w.Body)
	}
	page := w.Body.String()
	if got := cell(t, page, "group", "miners", "owner"); got != "vm/20153" {
		t.Errorf("miners owner = %q, want vm/20153", got)
	}
	if got := cell(t, page, "group", "cattle", "owner"); got != "vm2/3112" {
		t.Errorf("cattle owner = %q, want vm2/3112", got)
	}
	if got := cell(t, page, "member", "694d8f1a2b3c4d02", "owns"); got != "1" {
		t.Errorf("the other member owns %q, want 1", got)
	}
	if got := cell(t, page, "member", "694d8f1a2b3c4d01", "owns"); got != "2" {
		t.Errorf("this member owns %q, want 2", got)
	}
	mustContain(t, page, `<h2 id="members-h">Watch processes</h2>`, `observed by its owner, vm2/3112`,
		`scale-out: owns 2 objects of 4, one of 2 members`, `<span class="badge owner">this one</span>`)

	// Out of scale-out mode: no owner column, no member list.
	page = visit(newTestUI(t, &recordedAPI{}), "GET", "/", nil, true).Body.String()
	if strings.Contains(page, `data-field="owner"`) || strings.Contains(page, `id="members"`) {
		t.Error("owner column or member list outside scale-out mode")
	}
}

func TestSignIn(t *testing.T) {
	h := newTestUI(t, &recordedAPI{})
	w := visit(h, "GET", "/groups/miners", nil, false)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("GET /groups/miners signed out = %d, want 401", w.Code)
	}
	mustContain(t, w.Body.String(), `<form method="post" action="/login"`, `<label for="token">API token</label>`,
		`name="next" value="/groups/miners"`)

	w = visit(h, "POST", "/login", url.Values{"token": {"wrong"}, "next": {"/groups/miners"}}, false)
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "not this watch") || w.Header().Get("Set-Cookie") != "" {
		t.Fatalf("wrong token: %d %q\n%s", w.Code, w.Header().Get("Set-Cookie"), w.Body)
	}

	w = visit(h, "POST", "/login", url.Values{"token": {token}, "next": {"/groups/miners"}}, false)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/groups/miners" {
		t.Fatalf("sign in: %d to %q", w.Code, w.Header().Get("Location"))
	}
	c := w.Result().Cookies()
	if len(c) != 1 || c[0].Name != cookieName || c[0].Value != token || !c[0].HttpOnly ||
		c[0].SameSite != http.SameSiteStrictMode || c[0].Path != "/" || c[0].Secure {
		t.Fatalf("cookie = %+v", c)
	}

	// Over TLS the cookie is Secure.
	r := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.TLS = &tls.ConnectionState{}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if c := w.Result().Cookies(); len(c) != 1 || !c[0].Secure {
		t.Fatalf("cookie over TLS = %+v", c)
	}

	w = visit(h, "POST", "/logout", url.Values{}, true)
	if c := w.Result().Cookies(); w.Code != http.StatusSeeOther || len(c) != 1 || c[0].MaxAge >= 0 {
		t.Fatalf("sign out: %d %+v", w.Code, c)
	}

	// With -public-read the pages need no cookie.
	w = visit(newTestUI(t, &recordedAPI{public: true}), "GET", "/", nil, false)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `<tr data-group="miners">`) {
		t.Fatalf("public read: %d\n%s", w.Code, w.Body)
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"":                   "/",
		"/groups/miners":     "/groups/miners",
		"/events?group=web":  "/events?group=web",
		"//evil.example/":    "/",
		"https://evil.test/": "/",
		"/\\evil.example":    "/",
		"groups":             "/",
		"/login":             "/",
		"/logout?x=1":        "/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGroupPage(t *testing.T) {
	h := newTestUI(t, &recordedAPI{})
	w := visit(h, "GET", "/groups/miners", nil, true)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /groups/miners = %d\n%s", w.Code, w.Body)
	}
	page := w.Body.String()
	mustContain(t, page,
		`<h1>Group miners</h1>`,
		`<dd data-field="size">5</dd>`, `<dd data-field="instances">5</dd>`, `<dd data-field="healthy">5</dd>`,
		`<tr data-instance="compute-ff44e009">`, `<code>10.29.177.211</code>`,
		// The heal's replacement was created 29.9s before the clock; the
		// others before the events watch holds.
		`title="created 2026-12-02T14:26:46Z">29s</time>`,
		`data-group="miners"`,
		`<label for="scale-size">New size</label>`,
		`<form method="post" action="/groups/miners/scale" class="verb" data-api="/v1/groups/miners/scale" data-verb="scale"`,
		`action="/groups/miners/destroy-instances"`, `<input type="hidden" name="id" value="compute-ff44e009">`,
		`aria-label="Destroy instance compute-ff44e009…"`,
		`action="/groups/miners/free"`,
		`Backends of <a href="/loadbalancers/lb1">lb1</a>`,
	)
	// Only the group's events: the "synced" events without a group are not
	// listed, the miners' "synced" ones are.
	if n := strings.Count(page, `<li class="event`); n != 5 {
		t.Errorf("%d events listed, want the 5 of miners:\n%s", n, page)
	}

	if strings.Contains(page, `action="/groups/miners/stop-update"`) {
		t.Error("a stop-update button without a rolling update")
	}

	w = visit(h, "GET", "/groups/cattle", nil, true)
	mustContain(t, w.Body.String(), `Authorized by <a href="/enrollments/nfs">nfs</a>`, `<dd data-field="size">10</dd>`)

	w = visit(h, "GET", "/groups/nope", nil, true)
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "No such group") {
		t.Errorf("GET /groups/nope = %d\n%s", w.Code, w.Body)
	}
}

func TestEscaping(t *testing.T) {
	h := newTestUI(t, &recordedAPI{})
	w := visit(h, "GET", "/groups/"+url.PathEscape(`<script>alert(1)</script>`), nil, true)
	if strings.Contains(w.Body.String(), "<script>alert") {
		t.Fatalf("a group name reached the page unescaped:\n%s", w.Body)
	}
	mustContain(t, w.Body.String(), "&lt;script&gt;")
}

func TestLoadBalancerAndEnrollmentPages(t *testing.T) {
	h := newTestUI(t, &recordedAPI{})
	w := visit(h, "GET", "/loadbalancers/lb1", nil, true)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /loadbalancers/lb1 = %d\n%s", w.Code, w.Body)
	}
	page := w.Body.String()
	mustContain(t, page, `<td data-label="LB port">80</td>`, `<code>external-cer-id1</code>`,
		`Ingress <strong>test.com</strong>`)
	var groups []groupDoc
	data, _ := os.ReadFile("testdata/groups.json")
	if err := json.Unmarshal(data, &groups); err != nil {
		t.Fatal(err)
	}
	members := membersByID(groups)
	var backends backendsDoc
	data, _ = os.ReadFile("testdata/backends-lb1.json")
	if err := json.Unmarshal(data, &backends); err != nil {
		t.Fatal(err)
	}
	for _, id := range backends.Backends {
		row := regexp.MustCompile(`(?s)<tr data-backend="` + id + `">(.*?)</tr>`).FindStringSubmatch(page)
		m, known := members[id]
		switch {
		case row == nil:
			t.Errorf("backend %s not listed", id)
		case known && !strings.Contains(row[1], `<a href="/groups/miners">miners</a>`):
			t.Errorf("backend %s not named as a miner: %s", id, row[1])
		case known && m.Address != "" && !strings.Contains(row[1], m.Address):
			t.Errorf("backend %s lacks its address %s: %s", id, m.Address, row[1])
		case !known && !strings.Contains(row[1], "no group has this instance"):
			t.Errorf("backend %s of no group: %s", id, row[1])
		}
	}

	w = visit(h, "GET", "/enrollments/nfs", nil, true)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /enrollments/nfs = %d\n%s", w.Code, w.Body)
	}
	mustContain(t, w.Body.String(), `<tr data-authorization="auth-9d0c573c">`,
		`<code>compute-0f27aeeb</code> in <a href="/groups/cattle">cattle</a>`,
		`<code class="json">{&#34;host&#34;:&#34;compute-0f27aeeb&#34;,&#34;iops&#34;:10}</code>`)
}

func TestVerbWithoutJavaScript(t *testing.T) {
	api := &recordedAPI{verb: `{"exit_code": 0, "stdout": "Group \"miners\" scaled to 8: 3 created, 0 destroyed.\n", "stderr": ""}`}
	h := newTestUI(t, api)
	posts := func() int {
		n := 0
		for _, r := range api.requests() {
			if r.Method == http.MethodPost {
				n++
			}
		}
		return n
	}

	// The button asks first: for the confirmation and the token.
	w := visit(h, "POST", "/groups/miners/scale", url.Values{"size": {"8"}}, true)
	if w.Code != http.StatusOK || posts() != 0 {
		t.Fatalf("unconfirmed scale: %d, %d posts", w.Code, posts())
	}
	mustContain(t, w.Body.String(), `Scale group &#34;miners&#34; to 8?`, `<input type="hidden" name="confirm" value="yes">`,
		`<label for="token">API token</label>`)

	// The cookie alone is no credential for a write.
	w = visit(h, "POST", "/groups/miners/scale", url.Values{"size": {"8"}, "confirm": {"yes"}}, true)
	if w.Code != http.StatusBadRequest || posts() != 0 {
		t.Fatalf("scale without the typed token: %d, %d posts", w.Code, posts())
	}

	w = visit(h, "POST", "/groups/miners/scale", url.Values{"size": {"8"}, "confirm": {"yes"}, "token": {"wrong"}}, false)
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "not this watch") {
		t.Fatalf("scale with a wrong token: %d\n%s", w.Code, w.Body)
	}

	w = visit(h, "POST", "/groups/miners/scale", url.Values{"size": {"-1"}, "confirm": {"yes"}, "token": {token}}, false)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "0 or more") {
		t.Fatalf("scale to -1: %d\n%s", w.Code, w.Body)
	}

	before := posts()
	w = visit(h, "POST", "/groups/miners/scale", url.Values{"size": {"8"}, "confirm": {"yes"}, "token": {token}}, false)
	if w.Code != http.StatusOK || posts() != before+1 {
		t.Fatalf("scale: %d, %d posts\n%s", w.Code, posts(), w.Body)
	}
	mustContain(t, w.Body.String(), `<pre class="stdout">Group &#34;miners&#34; scaled to 8: 3 created, 0 destroyed.`)
	if got := api.body["POST /v1/groups/miners/scale"]; got != `{"size":8}` {
		t.Errorf("scale sent %s", got)
	}

	w = visit(h, "POST", "/groups/miners/destroy-instances", url.Values{"id": {"compute-1"}, "confirm": {"yes"}, "token": {token}}, false)
	if w.Code != http.StatusOK || api.body["POST /v1/groups/miners/destroy-instances"] != `{"ids":["compute-1"]}` {
		t.Fatalf("destroy-instances: %d, sent %s", w.Code, api.body["POST /v1/groups/miners/destroy-instances"])
	}
	w = visit(h, "POST", "/groups/miners/free", url.Values{"confirm": {"yes"}, "token": {token}}, false)
	if w.Code != http.StatusOK || api.body["POST /v1/groups/miners/free"] != `{}` {
		t.Fatalf("free: %d, sent %s", w.Code, api.body["POST /v1/groups/miners/free"])
	}
	if w = visit(h, "POST", "/groups/miners/destroy", url.Values{"confirm": {"yes"}, "token": {token}}, false); w.Code != http.StatusNotFound {
		t.Fatalf("destroy (no button for it) = %d", w.Code)
	}
}

func TestEventsAndStatic(t *testing.T) {
	h := newTestUI(t, &recordedAPI{})
	w := visit(h, "GET", "/events?group=miners", nil, true)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /events = %d", w.Code)
	}
	mustContain(t, w.Body.String(), `<h1>Events of miners</h1>`, `<option value="miners" selected>miners</option>`,
		`<label for="group-filter">Group</label>`)

	for _, p := range []string{"/static/ui.js", "/static/ui.css"} {
		w := visit(h, "GET", p, nil, false)
		if w.Code != http.StatusOK || w.Body.Len() < 1000 {
			t.Errorf("GET %s = %d, %d bytes", p, w.Code, w.Body.Len())
		}
	}
	if w := visit(h, "GET", "/nope", nil, true); w.Code != http.StatusNotFound {
		t.Errorf("GET /nope = %d", w.Code)
	}
}

// TestSignedOutReadsOnce: a visitor who did not sign in costs the API one
// refused read per page, not one per section.
func TestSignedOutReadsOnce(t *testing.T) {
	api := &recordedAPI{}
	h := newTestUI(t, api)
	for _, page := range []string{"/", "/groups/miners", "/loadbalancers/lb1", "/enrollments/nfs", "/events"} {
		before := len(api.requests())
		if w := visit(h, "GET", page, nil, false); w.Code != http.StatusUnauthorized {
			t.Errorf("GET %s signed out = %d", page, w.Code)
		}
		if n := len(api.requests()) - before; n != 1 {
			t.Errorf("GET %s signed out sent %d reads, want 1", page, n)
		}
	}
}
