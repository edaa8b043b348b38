package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file turns the Kubernetes OpenAPI document (swagger 2.0, api/openapi-spec/swagger.json in
// the k8s.io/kubernetes module) and CRD manifests into the JSON schema files kubeconform reads
// from a local -schema-location: KIND-SUFFIX.json per kind and version, the same names as in
// kubeconform's default registry. The schemas are strict: every object that lists its properties
// refuses others, as in the registry's "-strict" variant.

// kindFile is the file name kubeconform derives from a kind and an apiVersion (its schemaPath:
// "{{ .ResourceKind }}{{ .KindSuffix }}.json").
func kindFile(kind, apiVersion string) string {
	groupParts := strings.Split(apiVersion, "/")
	versionParts := strings.Split(groupParts[0], ".")
	suffix := "-" + strings.ToLower(versionParts[0])
	if len(groupParts) > 1 {
		suffix += "-" + strings.ToLower(groupParts[1])
	}
	return strings.ToLower(kind) + suffix + ".json"
}

// intOrString and quantity accept what the API server accepts: YAML numbers as well as strings.
var (
	intOrString = map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
	quantity    = map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
)

// strictify rewrites a schema tree in place: objects with properties refuse unknown ones (unless
// they preserve unknown fields), int-or-string formats accept both, and $refs to swagger
// definitions point into defsFile. It returns the node to use in place of s.
func strictify(s any, defsFile string) any {
	switch v := s.(type) {
	case map[string]any:
		if v["format"] == "int-or-string" || v["x-kubernetes-int-or-string"] == true {
			return intOrString
		}
		if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, "#/definitions/") && defsFile != "" {
			v["$ref"] = defsFile + ref
		}
		for k, c := range v {
			switch k {
			case "properties", "definitions", "patternProperties":
				if m, ok := c.(map[string]any); ok {
					for name, sub := range m {
						m[name] = strictify(sub, defsFile)
					}
				}
			case "enum", "required", "x-kubernetes-group-version-kind", "x-kubernetes-list-map-keys", "example", "default":
				// data, not schemas
			default:
				v[k] = strictify(c, defsFile)
			}
		}
		if _, has := v["properties"]; has && v["x-kubernetes-preserve-unknown-fields"] != true {
			if _, set := v["additionalProperties"]; !set {
				v["additionalProperties"] = false
			}
		}
		return v
	case []any:
		for i, c := range v {
			v[i] = strictify(c, defsFile)
		}
	}
	return s
}

// writeKubernetesSchemas writes _definitions.json and one small file per kind into dir from the
// swagger document at swaggerPath, and returns how many kind files it wrote.
func writeKubernetesSchemas(swaggerPath, dir string) (int, error) {
	data, err := os.ReadFile(swaggerPath)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return 0, fmt.Errorf("%s: %w", swaggerPath, err)
	}
	if len(doc.Definitions) == 0 {
		return 0, fmt.Errorf("%s: no definitions", swaggerPath)
	}
	defs := map[string]any{}
	kinds := map[string]string{} // file name -> definition name
	for name, def := range doc.Definitions {
		switch name {
		case "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
			defs[name] = intOrString
			continue
		case "io.k8s.apimachinery.pkg.api.resource.Quantity":
			defs[name] = quantity
			continue
		}
		if list, ok := def["x-kubernetes-group-version-kind"].([]any); ok {
			for _, e := range list {
				m, _ := e.(map[string]any)
				g, _ := m["group"].(string)
				v, _ := m["version"].(string)
				k, _ := m["kind"].(string)
				apiVersion := v
				if g != "" {
					apiVersion = g + "/" + v
				}
				// Only resources that carry apiVersion and kind fields (not the shared
				// DeleteOptions/WatchEvent listed under every group).
				props, _ := def["properties"].(map[string]any)
				if _, ok := props["kind"]; !ok {
					continue
				}
				kinds[kindFile(k, apiVersion)] = name
			}
		}
		defs[name] = strictify(def, "")
	}
	if err := writeJSON(filepath.Join(dir, "_definitions.json"), map[string]any{"definitions": defs}); err != nil {
		return 0, err
	}
	for file, name := range kinds {
		s := map[string]any{"$ref": "_definitions.json#/definitions/" + name}
		if err := writeJSON(filepath.Join(dir, file), s); err != nil {
			return 0, err
		}
	}
	return len(kinds), nil
}

// writeCRDSchemas writes a schema file for every served version of the CustomResourceDefinition
// in crdPath, from its openAPIV3Schema.
func writeCRDSchemas(crdPath, dir string) error {
	data, err := os.ReadFile(crdPath)
	if err != nil {
		return err
	}
	var crd struct {
		Spec struct {
			Group string `yaml:"group"`
			Names struct {
				Kind string `yaml:"kind"`
			} `yaml:"names"`
			Versions []struct {
				Name   string `yaml:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
				} `yaml:"schema"`
			} `yaml:"versions"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return fmt.Errorf("%s: %w", crdPath, err)
	}
	if crd.Spec.Names.Kind == "" || len(crd.Spec.Versions) == 0 {
		return fmt.Errorf("%s: not a CustomResourceDefinition with versions", crdPath)
	}
	for _, v := range crd.Spec.Versions {
		if v.Schema.OpenAPIV3Schema == nil {
			return fmt.Errorf("%s: version %s has no openAPIV3Schema", crdPath, v.Name)
		}
		s := strictify(jsonable(v.Schema.OpenAPIV3Schema), "")
		if err := writeJSON(filepath.Join(dir, kindFile(crd.Spec.Names.Kind, crd.Spec.Group+"/"+v.Name)), s); err != nil {
			return err
		}
	}
	return nil
}

// jsonable converts what yaml.v3 decodes (map[string]any, possibly with non-string keys
// elsewhere) into JSON-encodable values.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			x[k] = jsonable(c)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, c := range x {
			m[fmt.Sprint(k)] = jsonable(c)
		}
		return m
	case []any:
		for i, c := range x {
			x[i] = jsonable(c)
		}
	}
	return v
}

func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, data, 0o644)
}
