package config

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// WriteDiagnostics renders diagnostics for a terminal, each like:
//
//	Error: Unsupported argument
//
//	  on stack.hcl:3:5, in group "miners":
//	   3:   sise = 5
//	          ^^^^
//
//	An argument named "sise" is not expected here. Did you mean "size"?
//
// It follows hcl.NewDiagnosticTextWriter's layout, but also prints the
// column and underlines the range with carets, which hcl's writer only does
// with color; color adds VT100 colors on top. files are the parsed sources
// (Stack.Files); a diagnostic about a file not in it is shown without source.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics, color bool) error {
	for _, d := range diags {
		if err := writeDiagnostic(w, files, d, color); err != nil {
			return fmt.Errorf("write diagnostics: %w", err)
		}
	}
	return nil
}

func writeDiagnostic(w io.Writer, files map[string]*hcl.File, d *hcl.Diagnostic, color bool) error {
	var b strings.Builder
	severity, colorCode, reset := "Error", "", ""
	if d.Severity == hcl.DiagWarning {
		severity = "Warning"
	}
	if color {
		colorCode, reset = "\x1b[31m", "\x1b[0m"
		if d.Severity == hcl.DiagWarning {
			colorCode = "\x1b[33m"
		}
	}
	fmt.Fprintf(&b, "%s%s%s: %s\n\n", colorCode, severity, reset, d.Summary)

	if d.Subject != nil {
		writeSnippet(&b, files, d, colorCode, reset)
	}
	if d.Detail != "" {
		b.WriteString(d.Detail)
		b.WriteString("\n\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeSnippet writes where the subject is and the lines it spans (with the
// context range, when there is one), underlining the subject.
func writeSnippet(b *strings.Builder, files map[string]*hcl.File, d *hcl.Diagnostic, colorCode, reset string) {
	subject := *d.Subject
	// An empty range cannot be underlined; widen it to one character, as hcl does.
	if subject.Empty() {
		subject.End.Byte++
		subject.End.Column++
	}
	snip := subject
	if d.Context != nil {
		snip = hcl.RangeOver(snip, *d.Context)
	}

	pos := fmt.Sprintf("%s:%d:%d", subject.Filename, subject.Start.Line, subject.Start.Column)
	file := files[subject.Filename]
	if file == nil || file.Bytes == nil {
		fmt.Fprintf(b, "  on %s:\n  (source code not available)\n\n", pos)
		return
	}
	in := ""
	if nav, ok := file.Nav.(interface{ ContextString(offset int) string }); ok {
		if s := nav.ContextString(subject.Start.Byte); s != "" {
			in = ", in " + s
		}
	}
	fmt.Fprintf(b, "  on %s%s:\n", pos, in)

	src := file.Bytes
	sc := hcl.NewRangeScanner(src, subject.Filename, bufio.ScanLines)
	shown := 0
	for sc.Scan() {
		line := sc.Range()
		if line.Start.Byte > snip.End.Byte {
			break // the rest of the file is past the snippet
		}
		if !line.Overlaps(snip) {
			continue
		}
		if shown++; shown > maxSnippetLines {
			if shown == maxSnippetLines+1 {
				b.WriteString("      ...\n")
			}
			continue
		}
		before, highlighted, _ := line.PartitionAround(subject)
		if highlighted.Empty() && subject.Start.Line == line.Start.Line {
			// The subject is just past the end of the line (a missing
			// closing brace): point there.
			before = line
		}
		leadBytes, markedBytes := before.SliceBytes(src), highlighted.SliceBytes(src)
		if !highlighted.Empty() && highlighted.Start.Byte == line.Start.Byte {
			// A range continued from an earlier line: underline from the
			// first character, not the indentation.
			rest := bytes.TrimLeft(markedBytes, " \t")
			leadBytes, markedBytes = markedBytes[:len(markedBytes)-len(rest)], rest
		}
		text, lead, marked := clipLine(string(sc.Bytes()), string(leadBytes), string(markedBytes))
		fmt.Fprintf(b, "%4d: %s\n", line.Start.Line, text)
		if highlighted.Empty() && subject.Start.Line != line.Start.Line {
			continue
		}
		// Keep tabs so the carets line up under tab-indented source.
		var pad strings.Builder
		pad.WriteString("      ")
		for _, r := range lead {
			if r == '\t' {
				pad.WriteRune('\t')
			} else {
				pad.WriteRune(' ')
			}
		}
		n := max(1, utf8.RuneCountInString(marked))
		fmt.Fprintf(b, "%s%s%s%s\n", pad.String(), colorCode, strings.Repeat("^", n), reset)
	}
	b.WriteString("\n")
}

// A snippet shows at most maxSnippetLines lines of at most
// maxSnippetWidth characters: a subject spanning a whole file, or on a
// line megabytes long, must not make a diagnostic as large.
const (
	maxSnippetLines = 10
	maxSnippetWidth = 120
	// snippetLead is how many characters before the subject a clipped
	// line keeps.
	snippetLead = 40
)

// clipLine cuts a source line longer than maxSnippetWidth to a window
// around the subject, marking the cuts with "…". lead is the text of the
// line before the subject and marked the subject's part of it; it returns
// the three as shown.
func clipLine(line, lead, marked string) (string, string, string) {
	if utf8.RuneCountInString(line) <= maxSnippetWidth {
		return line, lead, marked
	}
	runes := []rune(line)
	start := max(0, utf8.RuneCountInString(lead)-snippetLead)
	end := min(len(runes), start+maxSnippetWidth)
	leadRunes := []rune(lead)[start:]
	markedRunes := []rune(marked)
	if room := end - start - len(leadRunes); len(markedRunes) > room {
		markedRunes = markedRunes[:max(room, 0)]
	}
	text := string(runes[start:end])
	shownLead := string(leadRunes)
	if start > 0 {
		text, shownLead = "…"+text, " "+shownLead
	}
	if end < len(runes) {
		text += "…"
	}
	return text, shownLead, string(markedRunes)
}
