package exports

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Entry is one authorization as the exports file records it.
type Entry struct {
	ID       string `json:"id"`
	SourceID string `json:"source_id"`
	Host     string `json:"host"`
	Volume   string `json:"volume"`
	// Options as authorized, before defaults; Describe returns them so an
	// enrollment sees what it asked for.
	Options    []string          `json:"options,omitempty"`
	Properties json.RawMessage   `json:"properties,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
}

// recordPrefix starts the comment line that carries an entry's record; the
// export line follows it.
const recordPrefix = "# infrakit:authorization "

const header = `# Managed by infrakit-provider-nfsexports: one export per authorization,
# each after a comment line recording it. Edits are lost on the next change;
# change the enrollment instead.
`

// Render writes the exports file for entries, sorted by volume, host and
// ID: per entry its record comment and `<volume> <host>(<options>)` (host
// without a port, see ExportHost), the
// options being the entry's (split at commas) or defaults when it has none.
func Render(entries []Entry, defaults []string) ([]byte, error) {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Volume, b.Volume), cmp.Compare(a.Host, b.Host), cmp.Compare(a.ID, b.ID))
	})
	var b bytes.Buffer
	b.WriteString(header)
	for _, e := range sorted {
		rec, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encode authorization %q: %w", e.ID, err)
		}
		fmt.Fprintf(&b, "%s%s\n%s %s(%s)\n", recordPrefix, rec, e.Volume, ExportHost(e.Host), strings.Join(EffectiveOptions(e.Options, defaults), ","))
	}
	return b.Bytes(), nil
}

// EffectiveOptions are the options an export line carries: opts split at
// commas, or defaults when there are none.
func EffectiveOptions(opts, defaults []string) []string {
	var out []string
	for _, o := range opts {
		for x := range strings.SplitSeq(o, ",") {
			if x = strings.TrimSpace(x); x != "" {
				out = append(out, x)
			}
		}
	}
	if len(out) == 0 {
		return slices.Clone(defaults)
	}
	return out
}

// Parse reads an exports file written by Render. It is strict about what
// Render writes, so that a torn or hand-broken file is an error rather than
// a silently shorter list: the file ends with a newline, every record
// comment decodes and is followed by the export line for its volume and
// host. Other comments and blank lines are skipped; export lines without a
// record (added by hand) are returned in stray.
func Parse(data []byte) (entries []Entry, stray []string, err error) {
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return nil, nil, fmt.Errorf("the file does not end with a newline (cut short?)")
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, recordPrefix):
			var e Entry
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, recordPrefix)), &e); err != nil {
				return nil, nil, fmt.Errorf("line %d: record: %w", i+1, err)
			}
			if e.ID == "" {
				return nil, nil, fmt.Errorf("line %d: record without an id", i+1)
			}
			if i+1 >= len(lines) {
				return nil, nil, fmt.Errorf("line %d: record of %s without its export line", i+1, e.ID)
			}
			i++
			vol, rest, _ := strings.Cut(lines[i], " ")
			host, _, _ := strings.Cut(rest, "(")
			if vol != e.Volume || host != ExportHost(e.Host) {
				return nil, nil, fmt.Errorf("line %d: export line %q does not match the record of %s (%s %s)", i+1, lines[i], e.ID, e.Volume, ExportHost(e.Host))
			}
			entries = append(entries, e)
		case strings.TrimSpace(line) == "", strings.HasPrefix(strings.TrimSpace(line), "#"):
		default:
			stray = append(stray, line)
		}
	}
	if ids := duplicateIDs(entries); len(ids) > 0 {
		return nil, nil, fmt.Errorf("authorization id(s) %s recorded twice", strings.Join(ids, ", "))
	}
	return entries, stray, nil
}

func duplicateIDs(entries []Entry) []string {
	seen := map[string]bool{}
	var dups []string
	for _, e := range entries {
		if seen[e.ID] {
			dups = append(dups, e.ID)
		}
		seen[e.ID] = true
	}
	return dups
}
