package codextest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema checks messages against the protocol schema of the pinned CLI,
// committed in supervisor/testdata/schema by `make schema`.
type Schema struct {
	clientRequest      *jsonschema.Schema
	clientNotification *jsonschema.Schema
	rpcError           *jsonschema.Schema
	responses          map[string]*jsonschema.Schema // by server request method
}

var (
	schemaOnce sync.Once
	schema     *Schema
	schemaErr  error
)

// LoadSchema compiles the committed schema once per test binary.
func LoadSchema() (*Schema, error) {
	schemaOnce.Do(func() { schema, schemaErr = loadSchema(filepath.Join(Root(), "supervisor", "testdata", "schema")) })
	return schema, schemaErr
}

func loadSchema(dir string) (*Schema, error) {
	c := jsonschema.NewCompiler()
	compile := func(name string) (*jsonschema.Schema, error) {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		url := "file:///schema/" + name
		if err := c.AddResource(url, doc); err != nil {
			return nil, err
		}
		return c.Compile(url)
	}
	s := &Schema{responses: map[string]*jsonschema.Schema{}}
	var err error
	if s.clientRequest, err = compile("ClientRequest.json"); err != nil {
		return nil, err
	}
	if s.clientNotification, err = compile("ClientNotification.json"); err != nil {
		return nil, err
	}
	if s.rpcError, err = compile("JSONRPCError.json"); err != nil {
		return nil, err
	}
	// Each server request names its params type; its reply type is the same
	// name with Response for Params.
	raw, err := os.ReadFile(filepath.Join(dir, "ServerRequest.json"))
	if err != nil {
		return nil, err
	}
	var sr struct {
		OneOf []struct {
			Properties struct {
				Method struct {
					Enum []string `json:"enum"`
				} `json:"method"`
				Params struct {
					Ref string `json:"$ref"`
				} `json:"params"`
			} `json:"properties"`
		} `json:"oneOf"`
	}
	if err := json.Unmarshal(raw, &sr); err != nil {
		return nil, err
	}
	for _, v := range sr.OneOf {
		params := strings.TrimPrefix(v.Properties.Params.Ref, "#/definitions/")
		name := strings.TrimSuffix(params, "Params") + "Response.json"
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			continue
		}
		sch, err := compile(name)
		if err != nil {
			return nil, err
		}
		for _, m := range v.Properties.Method.Enum {
			s.responses[m] = sch
		}
	}
	return s, nil
}

func decode(raw []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}

// ValidateReply checks the result of a reply to a server request.
func (s *Schema) ValidateReply(method string, result json.RawMessage) error {
	sch, ok := s.responses[method]
	if !ok {
		return fmt.Errorf("no response schema for %s", method)
	}
	v, err := decode(result)
	if err != nil {
		return err
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("reply to %s: %s: %w", method, result, err)
	}
	return nil
}

// ValidateClientMessage checks one line the client sent. method is the
// method of the server request that a response answers ("" otherwise).
func (s *Schema) ValidateClientMessage(line []byte, answering func(id json.RawMessage) string) error {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return fmt.Errorf("client sent malformed JSON: %w", err)
	}
	v, err := decode(line)
	if err != nil {
		return err
	}
	var sch *jsonschema.Schema
	switch {
	case m.Method != "" && m.ID != nil:
		sch = s.clientRequest
	case m.Method != "":
		sch = s.clientNotification
	case m.Error != nil:
		sch = s.rpcError
	case m.Result != nil:
		return s.ValidateReply(answering(m.ID), m.Result)
	default:
		return fmt.Errorf("client sent a message of no known shape: %s", line)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("client message %s: %w", line, err)
	}
	return nil
}
