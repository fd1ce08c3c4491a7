package awsimport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// decode reads a JSON or YAML document into plain values (map[string]any,
// []any, string, int, float64, bool, nil). CloudFormation's short tags
// (`!Ref X`, `!GetAtt A.B`, `!Sub ...`) become their long forms
// (`{"Ref": "X"}`, `{"Fn::GetAtt": ["A", "B"]}`, `{"Fn::Sub": ...}`), so
// the rest of the importer sees one form only.
func decode(data []byte) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the file is empty")
		}
		return nil, fmt.Errorf("not JSON or YAML: %w", err)
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("the file is empty")
	}
	budget := maxValues
	return convert(doc.Content[0], 0, &budget)
}

// maxDepth and maxValues bound the nesting decode follows and the values
// it builds, aliases expanded (guards against hostile input: a "billion
// laughs" of YAML aliases; real templates nest a few dozen levels and hold
// some thousands of values).
const (
	maxDepth  = 200
	maxValues = 1 << 20
)

func convert(n *yaml.Node, depth int, budget *int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("line %d: nested more than %d levels deep", n.Line, maxDepth)
	}
	if *budget--; *budget < 0 {
		return nil, fmt.Errorf("line %d: more than %d values once YAML aliases are expanded", n.Line, maxValues)
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nil, nil
		}
		return convert(n.Alias, depth+1, budget)
	}
	tag := n.Tag
	if strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!") {
		return shortTag(n, tag[1:], depth, budget)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return convert(n.Content[0], depth+1, budget)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.AliasNode && k.Alias != nil {
				k = k.Alias
			}
			if k.Value == "<<" && k.Tag == "!!merge" {
				v, err := convert(n.Content[i+1], depth+1, budget)
				if err != nil {
					return nil, err
				}
				if mm, ok := v.(map[string]any); ok {
					for kk, vv := range mm {
						if _, set := m[kk]; !set {
							m[kk] = vv
						}
					}
				}
				continue
			}
			v, err := convert(n.Content[i+1], depth+1, budget)
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := convert(c, depth+1, budget)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!bool":
			b, err := strconv.ParseBool(strings.ToLower(n.Value))
			if err != nil {
				return n.Value, nil
			}
			return b, nil
		case "!!int":
			if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
				return int(i), nil
			}
			return n.Value, nil
		case "!!float":
			if f, err := strconv.ParseFloat(n.Value, 64); err == nil {
				return f, nil
			}
			return n.Value, nil
		}
		return n.Value, nil
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

// shortTag turns a CloudFormation short-form intrinsic into its long form.
// From the CloudFormation intrinsic function reference: "!Ref logicalName"
// is the short form of {"Ref": logicalName}; "!GetAtt logicalNameOfResource.attributeName"
// of {"Fn::GetAtt": [logicalNameOfResource, attributeName]}; every other
// "!Name" of {"Fn::Name": ...}.
func shortTag(n *yaml.Node, name string, depth int, budget *int) (any, error) {
	plain := *n
	plain.Tag = ""
	switch n.Kind {
	case yaml.ScalarNode:
		plain.Tag = "!!str"
	case yaml.MappingNode:
		plain.Tag = "!!map"
	case yaml.SequenceNode:
		plain.Tag = "!!seq"
	}
	v, err := convert(&plain, depth+1, budget)
	if err != nil {
		return nil, err
	}
	switch name {
	case "Ref":
		return map[string]any{"Ref": v}, nil
	case "Condition":
		return map[string]any{"Condition": v}, nil
	case "GetAtt":
		if s, ok := v.(string); ok {
			res, attr, _ := strings.Cut(s, ".")
			return map[string]any{"Fn::GetAtt": []any{res, attr}}, nil
		}
	}
	return map[string]any{"Fn::" + name: v}, nil
}

// mapping returns v as a map, nil when it is not one.
func mapping(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// list returns v as a list, nil when it is not one.
func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// intrinsic returns the name and argument of a one-key intrinsic mapping
// ({"Ref": ...}, {"Fn::Sub": ...}); ok is false for anything else.
func intrinsic(v any) (name string, arg any, ok bool) {
	m := mapping(v)
	if len(m) != 1 {
		return "", nil, false
	}
	for k, a := range m {
		if k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::") {
			return k, a, true
		}
	}
	return "", nil, false
}
