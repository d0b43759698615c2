// templatecheck parses and runs Go text/template sources as Ollama does (template/template.go: the same option and
// function names), for tests/export/test_go_template.py. Input on stdin: a JSON list of {"template": "...",
// "messages": [{"role": "...", "content": "..."}]}; output: a JSON list of {"error": "..."} (Parse refused it), {"exec_error": "..."}
// or {"output": "..."}.
package main

import (
	"encoding/json"
	"os"
	"strings"
	"text/template"
)

type check struct {
	Template string              `json:"template"`
	Messages []map[string]string `json:"messages"`
}

type result struct {
	Error     *string `json:"error,omitempty"`
	ExecError *string `json:"exec_error,omitempty"`
	Output    *string `json:"output,omitempty"`
}

type message struct {
	Role    string
	Content string
}

var ollamaFunctions = template.FuncMap{
	"json":             func(v any) string { return "" },
	"currentDate":      func(args ...string) string { return "" },
	"yesterdayDate":    func(args ...string) string { return "" },
	"toTypeScriptType": func(v any) string { return "" },
}

func run(c check) result {
	tmpl, err := template.New("").Option("missingkey=zero").Funcs(ollamaFunctions).Parse(c.Template)
	if err != nil {
		text := err.Error()
		return result{Error: &text}
	}
	messages := make([]message, len(c.Messages))
	for i, m := range c.Messages {
		messages[i] = message{Role: m["role"], Content: m["content"]}
	}
	var out strings.Builder
	data := map[string]any{"Messages": messages, "System": "", "Role": "user", "Content": "root"}
	if err := tmpl.Execute(&out, data); err != nil {
		text := err.Error()
		return result{ExecError: &text}
	}
	text := out.String()
	return result{Output: &text}
}

func main() {
	var checks []check
	if err := json.NewDecoder(os.Stdin).Decode(&checks); err != nil {
		panic(err)
	}
	results := make([]result, len(checks))
	for i, c := range checks {
		results[i] = run(c)
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		panic(err)
	}
}
