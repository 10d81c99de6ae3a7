package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Commands are the CLI commands the API runs: the object commands.
// Everything else (init, watch, state edits, plugins) runs where the
// state is.
var Commands = []string{
	"apply", "enrollment describe", "enrollment destroy", "enrollment free",
	"group describe", "group destroy", "group destroy-instances", "group free", "group ls",
	"group scale", "group stop-update", "ingress describe", "ingress destroy", "ingress free",
	"lb backends ls", "lb routes ls", "output", "plan", "show",
}

// ReadCommands are those of Commands that change nothing and run no
// stack of the client's: a watch with -public-read runs them for the
// remote CLI without the token, as it answers GET reads.
var ReadCommands = []string{
	"enrollment describe", "group describe", "group ls", "ingress describe",
	"lb backends ls", "lb routes ls", "output", "show",
}

// commandWords splits argv into a command of Commands and its arguments
// (the longest command that argv starts with; nil when none).
func commandWords(argv []string) (words, args []string) {
	for n := min(3, len(argv)); n > 0; n-- {
		if slices.Contains(Commands, strings.Join(argv[:n], " ")) {
			return argv[:n], argv[n:]
		}
	}
	return nil, argv
}

// CLIRequest is POST /v1/cli: a command as the remote CLI sends it.
type CLIRequest struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
	// Files are the client's files by the names the arguments use.
	Files map[string][]byte `json:"files"`
	// Dir is the base name of the client's directory.
	Dir      string            `json:"dir"`
	Env      map[string]string `json:"env"`
	Terminal bool              `json:"terminal"`
}

// AnswerRequest is POST /v1/cli/SESSION.
type AnswerRequest struct {
	Answer string `json:"answer"`
}

func (s *Server) cli(w http.ResponseWriter, r *http.Request) {
	var req CLIRequest
	if !decode(w, r, &req) {
		return
	}
	if !slices.Contains(Commands, req.Command) {
		WriteError(w, http.StatusBadRequest, "Not a remote command",
			fmt.Sprintf("%q does not run against a remote watch: the API runs %s", req.Command, strings.Join(Commands, ", ")))
		return
	}
	for k := range req.Env {
		if !strings.HasPrefix(k, "INFRAKIT_VAR_") {
			WriteError(w, http.StatusBadRequest, "Bad environment", fmt.Sprintf("%q: only INFRAKIT_VAR_* variables are sent", k))
			return
		}
	}
	c := Command{Words: strings.Fields(req.Command), Args: req.Args, Env: req.Env, Terminal: req.Terminal}
	sess, err := s.ss.start(c, req.Files, req.Dir)
	if err != nil {
		WriteError(w, http.StatusBadRequest, "Bad client files", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, sess.wait(r.Context()))
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	var req AnswerRequest
	if !decode(w, r, &req) {
		return
	}
	rep, err := s.ss.resume(r.Context(), r.PathValue("session"), req.Answer)
	if errors.Is(err, errNoSession) {
		WriteError(w, http.StatusNotFound, "No such session", err.Error())
		return
	}
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "Error answering", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// StackRequest is POST /v1/plan and /v1/apply: a stack sent by the
// client, or (apply) a saved plan.
type StackRequest struct {
	Files map[string][]byte `json:"files"`
	// Vars are -var values (NAME=VALUE).
	Vars        []string `json:"vars"`
	JSON        bool     `json:"json"`
	Parallelism int      `json:"parallelism"`
	PlanFile    []byte   `json:"plan_file"`
}

// PlanReply is a Reply with the saved plan.
type PlanReply struct {
	Reply
	PlanFile []byte `json:"plan_file,omitempty"`
}

// planFileName is where a plan made through the API is saved, among the
// client's files.
const planFileName = ".infrakit-api.plan"

func (req StackRequest) args() []string {
	var args []string
	for _, v := range req.Vars {
		args = append(args, "-var", v)
	}
	if req.JSON {
		args = append(args, "-json")
	}
	if req.Parallelism > 0 {
		args = append(args, fmt.Sprintf("-parallelism=%d", req.Parallelism))
	}
	return args
}

func (s *Server) plan(w http.ResponseWriter, r *http.Request) {
	var req StackRequest
	if !decode(w, r, &req) {
		return
	}
	if req.PlanFile != nil {
		WriteError(w, http.StatusBadRequest, "Bad request", "plan takes a stack (files), not a plan_file")
		return
	}
	if _, clash := req.Files[planFileName]; clash {
		WriteError(w, http.StatusBadRequest, "Bad client files", planFileName+" is the API's own name for the plan it saves")
		return
	}
	argv := append([]string{"plan", "-out", planFileName}, req.args()...)
	rep, err := s.run(r, argv, req.Files)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "Error running the command", err.Error())
		return
	}
	out := PlanReply{Reply: rep, PlanFile: rep.Files[planFileName]}
	out.Files = nil
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) apply(w http.ResponseWriter, r *http.Request) {
	var req StackRequest
	if !decode(w, r, &req) {
		return
	}
	argv := append([]string{"apply"}, req.args()...)
	files := req.Files
	if req.PlanFile != nil {
		if len(req.Files) > 0 || len(req.Vars) > 0 {
			WriteError(w, http.StatusBadRequest, "Bad request", "a saved plan holds its stack and variables: send plan_file alone")
			return
		}
		files = map[string][]byte{planFileName: req.PlanFile}
		argv = append(argv, "--", planFileName)
	} else {
		argv = append(argv, "-auto-approve")
	}
	rep, err := s.run(r, argv, files)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "Error running the command", err.Error())
		return
	}
	rep.Files = nil
	writeJSON(w, http.StatusOK, rep)
}
