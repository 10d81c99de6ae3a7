// Package ui is the web UI that `infrakit watch` serves at "/": the stack
// at a glance, a page per group, load balancer and enrollment, the events,
// and buttons for the group verbs (scale, destroy an instance, free, stop
// an update).
//
// The UI has no data of its own. Every page is rendered on the server from
// the JSON API (internal/api, the /v1/... paths), called in-process with
// the visitor's credentials, so a page shows exactly what the API (and the
// CLI's -json) says, and reading works without JavaScript. The templates
// (html/template), the stylesheet and the script are embedded in the
// binary (go:embed); nothing is built or fetched.
//
// Credentials. Signing in (/login) keeps the API token in a cookie
// (api.CookieName: HttpOnly, SameSite=Strict), which the API accepts for
// reads only. A write always needs the token typed again: the script sends
// it as "Authorization: Bearer" to the API, and the forms that work without
// JavaScript post it as a field that this package forwards the same way.
// Another site's page can make a browser send the cookie, never the typed
// token, so no write can be forged.
//
// Live updates. The script listens to the event stream (GET /v1/events as
// Server-Sent Events), prepends each event to the page's list and then
// re-reads the page's counts and tables (the same server-rendered HTML,
// fetched again), so a heal shows without a reload.
package ui
