package site

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// yamlDoc edits a YAML document in place, keeping its comments, so that the generated
// configs read like the commented examples they come from.
type yamlDoc struct{ root yaml.Node }

// yamlEdit is a value to set at a path of a config.
type yamlEdit struct {
	value any
	path  []string
}

// applyEdits sets each edit's value in doc.
func applyEdits(doc *yamlDoc, edits []yamlEdit) error {
	for _, e := range edits {
		if err := doc.set(e.value, e.path...); err != nil {
			return err
		}
	}
	return nil
}

// parseYAMLDoc reads a YAML mapping for editing.
func parseYAMLDoc(b []byte) (*yamlDoc, error) {
	d := &yamlDoc{}
	if err := yaml.Unmarshal(b, &d.root); err != nil {
		return nil, err
	}
	if len(d.root.Content) == 0 || d.root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a YAML mapping")
	}
	return d, nil
}

// set replaces (or adds) the value at a path of mapping keys.
func (d *yamlDoc) set(value any, path ...string) error {
	var n yaml.Node
	if err := n.Encode(value); err != nil {
		return err
	}
	if n.Kind == yaml.SequenceNode {
		n.Style = yaml.FlowStyle
		for _, c := range n.Content {
			if c.Kind == yaml.MappingNode {
				n.Style = 0 // a list of mappings reads better in block style
			}
		}
	}
	m := d.root.Content[0]
	for i, key := range path {
		last := i == len(path)-1
		child := lookup(m, key)
		switch {
		case child == nil && last:
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &n)
			return nil
		case child == nil:
			child = &yaml.Node{Kind: yaml.MappingNode}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, child)
		case last:
			n.LineComment, n.HeadComment = child.LineComment, child.HeadComment
			*child = n
			return nil
		}
		m = child
	}
	return nil
}

// lookup is the value of key in mapping m, or nil.
func lookup(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// bytes is the document, indented by two spaces.
func (d *yamlDoc) bytes() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&d.root); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// remove drops a top-level key, so that its default applies.
func (d *yamlDoc) remove(key string) {
	m := d.root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}
