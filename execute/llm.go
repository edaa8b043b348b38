package execute

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/ndtrace/ndtrace/schemas"
)

// maxLLMResponse bounds what is read of a language model's response.
const maxLLMResponse = 1 << 20

// maxLLMLines bounds the lines of a response read as candidates.
const maxLLMLines = 4096

// llmProposer proposes argument lists for a unit by asking an OpenAI-compatible chat-completions
// endpoint (inputs.llm: POST URL/chat/completions) with the function's source: the request is
// made by the worker, outside the sandbox, so the source of every function given inputs is sent
// to that endpoint (docs/spec.md says so). Its answer is as hostile as the code: read up to
// maxLLMResponse within the spec's timeout, each line a candidate, kept only when it is a call of
// the function with literal arguments (validArgList), without repeats, at most Proposals. The
// argument lists go to the sandbox's generation run as seeds, executed and filtered like every
// other candidate (source llm).
type llmProposer struct {
	spec   schemas.LLMSpec
	seed   uint64
	client *http.Client
}

// newLLMProposer returns the proposer of spec (with its defaults) under the spec's seed.
func newLLMProposer(spec schemas.LLMSpec, seed uint64) *llmProposer {
	return &llmProposer{spec: spec, seed: seed, client: &http.Client{
		Timeout: spec.Timeout.Duration(),
		// The endpoint is the one named: a redirect elsewhere is not followed (the code would go
		// where the spec does not say).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// chatRequest and chatResponse are what is sent to and read of a chat-completions endpoint.
type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	Temperature float64       `json:"temperature"`
	Seed        int64         `json:"seed"`
	MaxTokens   int           `json:"max_tokens"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatResponse struct {
	Choices []struct {
		Message chatMessage `json:"message"`
	} `json:"choices"`
}

// llmSystem is the system message of every request.
const llmSystem = "You propose test inputs for Python functions. Answer only with calls of the function, " +
	"one per line, each with Python literal arguments (numbers, strings, bytes, None, True, False, " +
	"lists, tuples, dicts, sets), and nothing else."

// Propose asks for argument lists of u (see llmProposer).
func (p *llmProposer) Propose(ctx context.Context, u genUnit) ([]string, error) {
	name := u.fn.QualName[strings.LastIndexByte(u.fn.QualName, '.')+1:]
	prompt := fmt.Sprintf("Function %s of module %s:\n```python\n%s\n```\nWrite %d different calls %s(...) of it "+
		"(its own arguments only, without self or cls) that exercise different paths through it, one per line.",
		u.fn.QualName, u.mod.label(), u.src, p.spec.Proposals, name)
	body, err := json.Marshal(chatRequest{Model: p.spec.Model, Temperature: 0, Seed: genSeed(p.seed, "llm", u.mod.rel, u.fn.QualName),
		MaxTokens: 64 * (p.spec.Proposals + 4),
		Messages:  []chatMessage{{Role: "system", Content: llmSystem}, {Role: "user", Content: prompt}}})
	if err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	if d := p.spec.Timeout.Duration(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(p.spec.URL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("llm: %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxLLMResponse+1))
	if err != nil {
		return nil, fmt.Errorf("llm: read the response: %w", err)
	}
	if len(data) > maxLLMResponse {
		return nil, errors.New("llm: response larger than 1 MiB")
	}
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return nil, fmt.Errorf("llm: response: %w", err)
	}
	if len(cr.Choices) == 0 {
		return nil, errors.New("llm: response without choices")
	}
	return proposals(cr.Choices[0].Message.Content, u.fn.QualName, p.spec.Proposals), nil
}

// proposals are the argument lists of the lines of text that are calls of qual ("name",
// "Class.name") or of its last name with literal arguments, without repeats, at most n.
func proposals(text, qual string, n int) []string {
	name := qual[strings.LastIndexByte(qual, '.')+1:]
	var out []string
	seen := map[string]bool{}
	for i, line := range strings.Split(text, "\n") {
		if i >= maxLLMLines || len(out) >= n {
			break
		}
		line = strings.TrimSpace(line)
		// A list's marker, or the line's code quotes.
		for _, m := range []string{"- ", "* "} {
			line = strings.TrimPrefix(line, m)
		}
		if d := strings.IndexFunc(line, func(r rune) bool { return r < '0' || r > '9' }); d > 0 && d+1 < len(line) &&
			(line[d] == '.' || line[d] == ')') && line[d+1] == ' ' {
			line = strings.TrimSpace(line[d+2:])
		}
		if len(line) >= 2 && line[0] == '`' && line[len(line)-1] == '`' {
			line = strings.Trim(line, "`")
		}
		if len(line) > maxCallBytes {
			continue
		}
		rest, ok := strings.CutPrefix(line, qual+"(")
		if !ok {
			if rest, ok = strings.CutPrefix(line, name+"("); !ok {
				continue
			}
		}
		args, after, ok := scanArgs(rest)
		if !ok || after != "" || !validArgList(args) {
			continue
		}
		args = strings.TrimSpace(args)
		if !seen[args] {
			seen[args] = true
			out = append(out, args)
		}
	}
	return out
}
