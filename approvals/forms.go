package approvals

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// permissionProfile is what item/permissions/requestApproval asks for (and
// additionalPermissions of a command).
type permissionProfile struct {
	Network *struct {
		Enabled *bool `json:"enabled"`
	} `json:"network"`
	FileSystem *struct {
		Read    []string `json:"read"`
		Write   []string `json:"write"`
		Entries []struct {
			Path   json.RawMessage `json:"path"`
			Access string          `json:"access"`
		} `json:"entries"`
	} `json:"fileSystem"`
}

func (p *permissionProfile) describe() []string {
	var out []string
	if p.Network != nil && p.Network.Enabled != nil && *p.Network.Enabled {
		out = append(out, "network access")
	}
	if fs := p.FileSystem; fs != nil {
		listed := map[string]bool{}
		for _, e := range fs.Entries {
			what := entryPath(e.Path)
			listed[e.Access+" "+what] = true
			out = append(out, line(e.Access+" "+what))
		}
		for _, r := range fs.Read {
			if !listed["read "+r] {
				out = append(out, line("read "+r))
			}
		}
		for _, w := range fs.Write {
			if !listed["write "+w] {
				out = append(out, line("write "+w))
			}
		}
	}
	return out
}

// entryPath shows a FileSystemPath: {type:path,path}, {type:glob_pattern,
// pattern} or {type:special,value:{kind,...}}.
func entryPath(raw json.RawMessage) string {
	var p struct {
		Type    string          `json:"type"`
		Path    string          `json:"path"`
		Pattern string          `json:"pattern"`
		Value   json.RawMessage `json:"value"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return string(raw)
	}
	switch p.Type {
	case "path":
		return p.Path
	case "glob_pattern":
		return "glob " + p.Pattern
	}
	return p.Type + " " + string(p.Value)
}

func buildPermissions(raw json.RawMessage) (*built, error) {
	var p struct {
		ids
		Cwd         string          `json:"cwd"`
		Reason      *string         `json:"reason"`
		Permissions json.RawMessage `json:"permissions"`
	}
	if err := params(raw, &p); err != nil {
		return nil, err
	}
	var prof permissionProfile
	if err := json.Unmarshal(p.Permissions, &prof); err != nil || len(p.Permissions) == 0 {
		return nil, refuse("the permissions asked for do not parse")
	}
	b := &built{card: Card{Kind: KindPermissions}}
	c := &b.card
	p.ids.apply(c)
	c.Cwd = line(p.Cwd)
	if p.Reason != nil {
		c.Reason = Escape(*p.Reason, true)
	}
	c.Permissions = prof.describe()
	if len(c.Permissions) == 0 {
		return nil, refuse("the permissions request asks for nothing it can show")
	}
	granted := grantedProfile(p.Permissions)
	b.replies = map[Decision]json.RawMessage{
		DecisionAllow:        mustJSON(map[string]any{"permissions": granted, "scope": "turn"}),
		DecisionAllowSession: mustJSON(map[string]any{"permissions": granted, "scope": "session"}),
		DecisionDeny:         mustJSON(map[string]any{"permissions": map[string]any{}, "scope": "turn"}),
	}
	c.Decisions = orderDecisions(b.replies)
	return b, nil
}

// grantedProfile is exactly the requested profile, in the reply's shape:
// the requested network and file-system parts, nothing else.
func grantedProfile(requested json.RawMessage) map[string]json.RawMessage {
	var req map[string]json.RawMessage
	_ = json.Unmarshal(requested, &req) // parsed once already by buildPermissions
	out := map[string]json.RawMessage{}
	if n, ok := req["network"]; ok && string(n) != "null" {
		out["network"] = n
	}
	if fs, ok := req["fileSystem"]; ok && string(fs) != "null" {
		var parts map[string]json.RawMessage
		if json.Unmarshal(fs, &parts) == nil {
			kept := map[string]json.RawMessage{}
			for _, k := range []string{"read", "write", "entries"} {
				if v, ok := parts[k]; ok && string(v) != "null" {
					kept[k] = v
				}
			}
			out["fileSystem"] = mustJSON(kept)
		}
	}
	return out
}

// formKind says how the answer of a card that takes input is built.
type formKind int

const (
	noForm formKind = iota
	elicitationForm
	questionForm
)

type elicitationParams struct {
	ThreadID        string  `json:"threadId"`
	TurnID          *string `json:"turnId"`
	ServerName      string  `json:"serverName"`
	Mode            string  `json:"mode"`
	Message         string  `json:"message"`
	URL             string  `json:"url"`
	RequestedSchema *struct {
		Properties map[string]struct {
			Type        string   `json:"type"`
			Title       string   `json:"title"`
			Description string   `json:"description"`
			Enum        []string `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	} `json:"requestedSchema"`
}

func buildElicitation(raw json.RawMessage) (*built, error) {
	var p elicitationParams
	if err := params(raw, &p); err != nil {
		return nil, err
	}
	b := &built{card: Card{Kind: KindElicitation, ThreadID: p.ThreadID}, form: elicitationForm}
	c := &b.card
	if p.TurnID != nil {
		c.TurnID = *p.TurnID
	}
	c.Server = line(p.ServerName)
	c.Message = Escape(p.Message, true)
	b.replies = map[Decision]json.RawMessage{
		DecisionDeny: mustJSON(map[string]any{"action": "decline", "content": nil, "_meta": nil}),
		DecisionStop: mustJSON(map[string]any{"action": "cancel", "content": nil, "_meta": nil}),
	}
	switch p.Mode {
	case "url":
		if p.URL == "" {
			return nil, refuse("url elicitation without a url")
		}
		c.URL = line(p.URL)
		b.replies[DecisionAllow] = mustJSON(map[string]any{"action": "accept", "content": nil, "_meta": nil})
	case "form":
		if p.RequestedSchema == nil {
			return nil, refuse("form elicitation without a schema")
		}
		for _, name := range slices.Sorted(maps.Keys(p.RequestedSchema.Properties)) {
			prop := p.RequestedSchema.Properties[name]
			f := Field{Name: line(name), Label: line(firstNonEmpty(prop.Title, prop.Description, name)), Type: prop.Type,
				Required: slices.Contains(p.RequestedSchema.Required, name), Options: lines(prop.Enum)}
			switch {
			case len(prop.Enum) > 0:
				f.Type = "enum"
			case prop.Type == "string", prop.Type == "number", prop.Type == "integer", prop.Type == "boolean":
			default:
				return nil, refuse("form field %q has a type codexgate cannot show: %q", name, prop.Type)
			}
			if f.Name != name || !slices.Equal(f.Options, prop.Enum) {
				return nil, refuse("form field %q holds hidden characters in its name or options", f.Name)
			}
			c.Fields = append(c.Fields, f)
		}
		c.NeedsInput = len(c.Fields) > 0
		b.replies[DecisionAllow] = nil // built from the values entered
	default:
		return nil, refuse("elicitation mode %q is not supported", p.Mode)
	}
	c.Decisions = orderDecisions(b.replies)
	return b, nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func buildQuestion(raw json.RawMessage) (*built, error) {
	var p struct {
		ids
		Questions []struct {
			ID       string `json:"id"`
			Header   string `json:"header"`
			Question string `json:"question"`
			IsOther  bool   `json:"isOther"`
			IsSecret bool   `json:"isSecret"`
			Options  []struct {
				Label       string `json:"label"`
				Description string `json:"description"`
			} `json:"options"`
		} `json:"questions"`
	}
	if err := params(raw, &p); err != nil {
		return nil, err
	}
	if len(p.Questions) == 0 {
		return nil, refuse("user input request without questions")
	}
	b := &built{card: Card{Kind: KindQuestion, NeedsInput: true}, form: questionForm}
	c := &b.card
	p.ids.apply(c)
	for _, q := range p.Questions {
		if q.ID == "" || line(q.ID) != q.ID {
			return nil, refuse("a question has an empty or hidden id")
		}
		f := Field{Name: q.ID, Label: Escape(strings.TrimSpace(q.Header+": "+q.Question), true), Type: "choice", Other: q.IsOther, Secret: q.IsSecret, Required: true}
		for _, o := range q.Options {
			if line(o.Label) != o.Label {
				return nil, refuse("an option of question %q holds hidden characters", q.ID)
			}
			f.Options = append(f.Options, o.Label)
		}
		if len(f.Options) == 0 {
			f.Type, f.Other = "string", true
		}
		c.Fields = append(c.Fields, f)
	}
	b.replies = map[Decision]json.RawMessage{
		DecisionAllow: nil, // built from the chosen answers
		DecisionDeny:  mustJSON(map[string]any{"answers": map[string]any{}}),
	}
	c.Decisions = orderDecisions(b.replies)
	return b, nil
}

// formReply builds the answer of a card that takes input from values, after
// checking each against its field. Values are keyed by field name.
func formReply(b *built, values map[string]string) (json.RawMessage, error) {
	c := &b.card
	for name := range values {
		if !slices.ContainsFunc(c.Fields, func(f Field) bool { return f.Name == name }) {
			return nil, fmt.Errorf("the card has no field %q", name)
		}
	}
	switch b.form {
	case questionForm:
		answers := map[string]any{}
		for _, f := range c.Fields {
			v, ok := values[f.Name]
			if !ok || v == "" {
				return nil, fmt.Errorf("question %q needs an answer", f.Name)
			}
			if !f.Other && !slices.Contains(f.Options, v) {
				return nil, fmt.Errorf("answer %q to %q is not one of its options", v, f.Name)
			}
			answers[f.Name] = map[string]any{"answers": []string{v}}
		}
		return mustJSON(map[string]any{"answers": answers}), nil
	case elicitationForm:
		content := map[string]any{}
		for _, f := range c.Fields {
			v, ok := values[f.Name]
			if !ok || v == "" {
				if f.Required {
					return nil, fmt.Errorf("field %q is required", f.Name)
				}
				continue
			}
			val, err := fieldValue(f, v)
			if err != nil {
				return nil, err
			}
			content[f.Name] = val
		}
		return mustJSON(map[string]any{"action": "accept", "content": content, "_meta": nil}), nil
	}
	return nil, fmt.Errorf("the card takes no input")
}

func fieldValue(f Field, v string) (any, error) {
	switch f.Type {
	case "enum":
		if !slices.Contains(f.Options, v) {
			return nil, fmt.Errorf("field %q must be one of %s", f.Name, strings.Join(f.Options, ", "))
		}
		return v, nil
	case "boolean":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("field %q must be true or false", f.Name)
		}
		return b, nil
	case "integer":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("field %q must be a whole number", f.Name)
		}
		return n, nil
	case "number":
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("field %q must be a number", f.Name)
		}
		return n, nil
	}
	return v, nil
}
