package config

import (
	"bufio"
	"bytes"

	"github.com/hashicorp/hcl/v2"
)

// JSONDiagnostic is a diagnostic as `validate -json` prints it, in the shape
// of Terraform's machine-readable diagnostics, so tools that read those
// (editors, CI annotations) read infrakit's.
type JSONDiagnostic struct {
	Severity string       `json:"severity"` // "error" or "warning"
	Summary  string       `json:"summary"`
	Detail   string       `json:"detail"`
	Range    *JSONRange   `json:"range,omitempty"`
	Snippet  *JSONSnippet `json:"snippet,omitempty"`
}

// JSONRange is a diagnostic's subject: a file and two positions in it.
type JSONRange struct {
	Filename string  `json:"filename"`
	Start    JSONPos `json:"start"`
	End      JSONPos `json:"end"`
}

// JSONPos is a position: 1-based line and column, 0-based byte offset.
type JSONPos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// JSONSnippet is the source around the subject. Code holds the whole lines
// the subject (and its context range) span, starting at StartLine; the
// highlight offsets are the subject's bytes within Code. Context names the
// enclosing block (`group "web"`), null when there is none.
type JSONSnippet struct {
	Context              *string `json:"context"`
	Code                 string  `json:"code"`
	StartLine            int     `json:"start_line"`
	HighlightStartOffset int     `json:"highlight_start_offset"`
	HighlightEndOffset   int     `json:"highlight_end_offset"`
	// Values is always empty: infrakit does not report expression values.
	Values []struct{} `json:"values"`
}

// JSONDiagnostics converts diags; files are the parsed sources
// (Stack.Files), from which snippets are taken when a diagnostic's file is
// among them.
func JSONDiagnostics(files map[string]*hcl.File, diags hcl.Diagnostics) []JSONDiagnostic {
	out := make([]JSONDiagnostic, 0, len(diags))
	for _, d := range diags {
		j := JSONDiagnostic{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			j.Severity = "warning"
		}
		if d.Subject != nil {
			s := *d.Subject
			j.Range = &JSONRange{Filename: s.Filename,
				Start: JSONPos{Line: s.Start.Line, Column: s.Start.Column, Byte: s.Start.Byte},
				End:   JSONPos{Line: s.End.Line, Column: s.End.Column, Byte: s.End.Byte}}
			j.Snippet = jsonSnippet(files[s.Filename], d)
		}
		out = append(out, j)
	}
	return out
}

// jsonSnippet cuts the lines of file that d's subject and context span.
func jsonSnippet(file *hcl.File, d *hcl.Diagnostic) *JSONSnippet {
	if file == nil || file.Bytes == nil {
		return nil
	}
	subject := *d.Subject
	snip := subject
	if d.Context != nil {
		snip = hcl.RangeOver(snip, *d.Context)
	}
	var code bytes.Buffer
	start, first := -1, 0
	sc := hcl.NewRangeScanner(file.Bytes, subject.Filename, bufio.ScanLines)
	for sc.Scan() {
		line := sc.Range()
		if !line.Overlaps(snip) && !(subject.Empty() && line.ContainsOffset(subject.Start.Byte)) {
			continue
		}
		if start < 0 {
			start, first = line.Start.Line, line.Start.Byte
		} else {
			code.WriteByte('\n')
		}
		code.Write(sc.Bytes())
	}
	if start < 0 {
		return nil
	}
	s := &JSONSnippet{Code: code.String(), StartLine: start, Values: []struct{}{},
		HighlightStartOffset: subject.Start.Byte - first, HighlightEndOffset: subject.End.Byte - first}
	s.HighlightStartOffset = min(max(s.HighlightStartOffset, 0), len(s.Code))
	s.HighlightEndOffset = min(max(s.HighlightEndOffset, s.HighlightStartOffset), len(s.Code))
	if nav, ok := file.Nav.(interface{ ContextString(offset int) string }); ok {
		if c := nav.ContextString(subject.Start.Byte); c != "" {
			s.Context = &c
		}
	}
	return s
}
