package filesd

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// RecordLabel is the hidden label of each target group that records its
// authorization as JSON. Prometheus drops labels starting with "__" once
// relabeling is done, so it never reaches a series; it shows on the
// Service Discovery page as a discovered label.
const RecordLabel = "__infrakit_authorization"

// Labels the provider sets on every target from the authorization.
const (
	InstanceLabel  = "infrakit_instance"   // the member's instance ID
	LogicalIDLabel = "infrakit_logical_id" // a pet's logical ID
)

// Entry is one authorization and the target group it is.
type Entry struct {
	ID       string            `json:"id"`
	SourceID string            `json:"source_id"`
	Host     string            `json:"host,omitempty"`
	Volume   string            `json:"volume,omitempty"`
	Options  []string          `json:"options,omitempty"`
	Props    json.RawMessage   `json:"properties,omitempty"`
	Tags     map[string]string `json:"tags,omitempty"`

	// Address and Labels are the target group, from the properties; not
	// part of the record (the group holds them).
	Address string            `json:"-"`
	Labels  map[string]string `json:"-"`
}

// Authorization is the entry as the SPI describes it.
func (e Entry) Authorization() nfs.Authorization {
	return nfs.Authorization{
		ID: e.ID, SourceID: instance.ID(e.SourceID), Host: e.Host, Volume: e.Volume,
		Options: e.Options, Properties: e.Props, Tags: e.Tags,
	}
}

// group is a file_sd target group, as Prometheus reads it.
type group struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// Render is the file_sd file of entries: one target group per entry, in
// ID order, each with its record label. No entries is an empty list,
// which Prometheus reads as no targets.
func Render(entries []Entry) ([]byte, error) {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b Entry) int { return cmp.Compare(a.ID, b.ID) })
	groups := make([]group, 0, len(entries))
	for _, e := range entries {
		rec, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("authorization %s: %w", e.ID, err)
		}
		labels := maps.Clone(e.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[RecordLabel] = string(rec)
		groups = append(groups, group{Targets: []string{e.Address}, Labels: labels})
	}
	b, err := json.MarshalIndent(groups, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Parse reads a file_sd file Render wrote. Target groups without a
// readable record (written by someone else) are counted in stray and left
// out. A file that is not a JSON list of target groups (cut short, say) is
// an error, never fewer entries.
func Parse(b []byte) (entries []Entry, stray int, err error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, 0, nil
	}
	var groups []group
	if err := json.Unmarshal(b, &groups); err != nil {
		return nil, 0, fmt.Errorf("not a file_sd list of target groups: %w", err)
	}
	for _, g := range groups {
		var e Entry
		rec, ok := g.Labels[RecordLabel]
		if !ok || len(g.Targets) != 1 || json.Unmarshal([]byte(rec), &e) != nil || e.ID == "" {
			stray++
			continue
		}
		e.Address = g.Targets[0]
		e.Labels = maps.Clone(g.Labels)
		delete(e.Labels, RecordLabel)
		entries = append(entries, e)
	}
	return entries, stray, nil
}

// readFile parses a target file; a missing one has no entries.
func readFile(file string) ([]Entry, int, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	entries, stray, err := Parse(b)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", file, err)
	}
	return entries, stray, nil
}

// targetLabels are the labels of an authorization's target: the
// properties' labels, the member's instance ID and a pet's logical ID.
func targetLabels(auth nfs.Authorization, props Properties) map[string]string {
	labels := maps.Clone(props.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[InstanceLabel] = sourceOf(auth)
	if id := auth.Tags[tagLogicalID]; id != "" {
		labels[LogicalIDLabel] = id
	}
	return labels
}

// Tags infrakit puts on authorizations (internal/tags names them; a
// provider reads them as the SPI passes them).
const (
	tagSourceID  = "infrakit.enrollment.source_id"
	tagLogicalID = "infrakit.logical_id"
)

// sourceOf is the member an authorization is for: its source ID tag, else
// its SourceID, as enrollments read it.
func sourceOf(auth nfs.Authorization) string {
	if id := strings.TrimSpace(auth.Tags[tagSourceID]); id != "" {
		return id
	}
	return string(auth.SourceID)
}
