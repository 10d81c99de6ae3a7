package api

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/infrakit/infrakit/internal/config"
)

// ErrorBody is every error answer: the diagnostic the CLI would print
// (summary and detail), and all of them when the command printed several.
type ErrorBody struct {
	Error       ErrorDetail             `json:"error"`
	ExitCode    int                     `json:"exit_code,omitempty"`
	Diagnostics []config.JSONDiagnostic `json:"diagnostics,omitempty"`
}

// ErrorDetail is an error's diagnostic.
type ErrorDetail struct {
	Summary string `json:"summary"`
	Detail  string `json:"detail"`
}

// WriteError answers code with an ErrorBody.
func WriteError(w http.ResponseWriter, code int, summary, detail string) {
	writeJSON(w, code, ErrorBody{Error: ErrorDetail{Summary: summary, Detail: detail}})
}

// writeFailure answers a read whose command failed: with its first error
// diagnostic, 404 when it says the object is not there.
func writeFailure(w http.ResponseWriter, rep Reply) {
	body := ErrorBody{ExitCode: rep.ExitCode, Diagnostics: rep.Diagnostics}
	for _, d := range rep.Diagnostics {
		if d.Severity == "error" {
			body.Error = ErrorDetail{Summary: d.Summary, Detail: d.Detail}
			break
		}
	}
	if body.Error.Summary == "" {
		// A message, not a diagnostic (a bad argument): its first line.
		msg := strings.TrimSpace(rep.Stderr)
		summary, detail, _ := strings.Cut(msg, "\n")
		body.Error = ErrorDetail{Summary: summary, Detail: strings.TrimSpace(detail)}
	}
	code := http.StatusInternalServerError
	if notFound(body.Error) {
		code = http.StatusNotFound
	}
	writeJSON(w, code, body)
}

// notFound: the CLI's way of saying an object is not in the state.
func notFound(e ErrorDetail) bool {
	return strings.HasPrefix(e.Summary, "No such") || strings.Contains(e.Detail, "not in the state") ||
		strings.Contains(e.Detail, "no such")
}

// writeJSON writes v indented, for people reading it with curl.
func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		body, _ = json.Marshal(ErrorBody{Error: ErrorDetail{Summary: "Error encoding the answer", Detail: err.Error()}})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}
