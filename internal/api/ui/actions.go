package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxForm bounds a form's body: a token, a size and instance IDs.
const maxForm = 64 << 10

// groupVerbs are the group verbs the UI has buttons for.
var groupVerbs = map[string]bool{"scale": true, "destroy-instances": true, "free": true, "stop-update": true}

// action is one group verb asked for by a form: what to confirm, then to
// send to the API.
type action struct {
	Group string
	Verb  string
	Size  string
	IDs   []string
	// Error says why the form cannot be sent as it is (a bad size, a
	// wrong token).
	Error string
}

// Path is where the form posts; API the endpoint of the verb.
func (a action) Path() string { return "/groups/" + url.PathEscape(a.Group) + "/" + a.Verb }
func (a action) API() string  { return "/v1/groups/" + url.PathEscape(a.Group) + "/" + a.Verb }

// Question is what the confirmation asks.
func (a action) Question() string {
	switch a.Verb {
	case "scale":
		return fmt.Sprintf("Scale group %q to %s?", a.Group, a.Size)
	case "destroy-instances":
		return fmt.Sprintf("Destroy %s of group %q: %s?", plural(len(a.IDs), "instance"), a.Group, strings.Join(a.IDs, ", "))
	case "free":
		return fmt.Sprintf("Free group %q?", a.Group)
	case "stop-update":
		return fmt.Sprintf("Stop the rolling update of group %q?", a.Group)
	}
	return ""
}

// Consequence says what the verb does, as the CLI's help does.
func (a action) Consequence() string {
	switch a.Verb {
	case "scale":
		return "Instances are created or destroyed (deregistered and revoked first, then drained) until the group has that size; the answer comes once it has."
	case "destroy-instances":
		return "Each is deregistered and revoked, drained and destroyed, and the group shrinks by as many: they are not replaced."
	case "free":
		return "infrakit stops managing the group and touches none of its instances; the next apply takes it back."
	case "stop-update":
		return "The rolling update halts where it is until the next apply."
	}
	return ""
}

// Button is the confirming button's label.
func (a action) Button() string {
	switch a.Verb {
	case "scale":
		return "Scale"
	case "destroy-instances":
		return "Destroy"
	case "free":
		return "Free"
	case "stop-update":
		return "Stop the update"
	}
	return "Confirm"
}

// body is the verb's JSON body (website/api.md).
func (a action) body() (any, error) {
	switch a.Verb {
	case "scale":
		n, err := strconv.Atoi(strings.TrimSpace(a.Size))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("the size must be a whole number, 0 or more; got %q", a.Size)
		}
		return map[string]int{"size": n}, nil
	case "destroy-instances":
		if len(a.IDs) == 0 {
			return nil, errors.New("name the instances to destroy")
		}
		return map[string][]string{"ids": a.IDs}, nil
	}
	return map[string]any{}, nil
}

// resultPage is the answer of a verb sent without JavaScript.
type resultPage struct {
	Action action
	Result verbResult
}

// groupVerb answers a group verb's form. Without "confirm" and the token
// it asks for both; with them it sends the verb to the API, the typed
// token as the credential (never the cookie), and shows its answer.
func (s *site) groupVerb(w http.ResponseWriter, r *http.Request) {
	a := action{Group: r.PathValue("name"), Verb: r.PathValue("verb")}
	if !groupVerbs[a.Verb] {
		s.fail(w, r, &apiError{Status: http.StatusNotFound, Summary: "No such verb",
			Detail: fmt.Sprintf("%q is not a group verb the web UI has (scale, destroy-instances, free, stop-update).", a.Verb)})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, &apiError{Status: http.StatusBadRequest, Summary: "Bad form", Detail: err.Error()})
		return
	}
	a.Size, a.IDs = r.PostForm.Get("size"), r.PostForm["id"]
	body, err := a.body()
	if err != nil {
		a.Error = err.Error()
		s.confirm(w, r, http.StatusBadRequest, a)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if r.PostForm.Get("confirm") != "yes" {
		s.confirm(w, r, http.StatusOK, a)
		return
	}
	if token == "" {
		a.Error = "Enter the API token: changes need it typed, every time."
		s.confirm(w, r, http.StatusBadRequest, a)
		return
	}
	res, err := caller{api: s.api, from: r, token: token}.post(r.Context(), a.API(), body)
	if unauthorized(err) {
		a.Error = "That is not this watch's API token (" + err.Error() + ")."
		s.confirm(w, r, http.StatusUnauthorized, a)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "result", layout{Title: a.Question(), Page: resultPage{Action: a, Result: res}})
}

func (s *site) confirm(w http.ResponseWriter, r *http.Request, status int, a action) {
	s.render(w, r, status, "confirm", layout{Title: a.Question(), Path: "/groups/" + url.PathEscape(a.Group), Page: a})
}

// loginPage is the sign-in form.
type loginPage struct {
	// Next is where to go once signed in.
	Next  string
	Error string
}

func (s *site) renderLogin(w http.ResponseWriter, r *http.Request, status int, next, msg string) {
	s.render(w, r, status, "login", layout{Title: "Sign in", Path: "/login", Page: loginPage{Next: localPath(next), Error: msg}})
}

func (s *site) loginForm(w http.ResponseWriter, r *http.Request) {
	s.renderLogin(w, r, http.StatusOK, r.URL.Query().Get("next"), "")
}

// login checks the token against the API and keeps it in the cookie the
// API reads.
func (s *site) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, &apiError{Status: http.StatusBadRequest, Summary: "Bad form", Detail: err.Error()})
		return
	}
	next := r.PostForm.Get("next")
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if token == "" {
		s.renderLogin(w, r, http.StatusBadRequest, next, "Enter the API token.")
		return
	}
	var st struct{}
	err := caller{api: s.api, from: r, token: token}.get(r.Context(), "/v1/status", &st)
	if unauthorized(err) {
		s.renderLogin(w, r, http.StatusUnauthorized, next, "That is not this watch's API token.")
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, localPath(next), http.StatusSeeOther)
}

func (s *site) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// localPath is next if it is a path of this site other than the sign-in
// and sign-out pages, else "/": a link cannot send someone elsewhere.
func localPath(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") ||
		u.Path == "/login" || u.Path == "/logout" {
		return "/"
	}
	return u.RequestURI()
}
