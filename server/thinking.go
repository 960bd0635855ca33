package server

import (
	"strings"

	"github.com/aimaproject/aimac/chat"
	"github.com/aimaproject/aimac/openai"
)

// thinkBudget bounds a generation's reasoning: once it holds n tokens the
// server writes close, the tokens that end a reasoning block as the chat
// template writes one, and the answer continues from there.
type thinkBudget struct {
	limited bool
	n       int
	close   []int32
}

// defaultReasoningClose is how Qwen3 templates end a reasoning block, for a
// template that renders none back.
const defaultReasoningClose = "\n</think>\n\n"

// reasoningClose returns the text the checkpoint's chat template writes
// between an assistant turn's reasoning and its answer: the template
// renders a turn with marked reasoning and content and the text between
// the marks is read off.
func reasoningClose(t *chat.Template) string {
	const reasoning, content = "\x00reasoning\x00", "\x00answer\x00"
	msgs := `[{"role":"user","content":"q"},{"role":"assistant","reasoning_content":"` + reasoning + `","content":"` + content + `"}]`
	text, err := t.Render(chat.Input{Messages: []byte(msgs)})
	if err != nil {
		return defaultReasoningClose
	}
	_, after, ok := strings.Cut(text, reasoning)
	between, _, found := strings.Cut(after, content)
	if !ok || !found || !strings.Contains(between, "</think>") {
		return defaultReasoningClose
	}
	return between
}

// newThinkBudget is the budget of a request that asked for one (limited)
// with n reasoning tokens.
func newThinkBudget(m *Model, n int, limited bool) thinkBudget {
	if !limited {
		return thinkBudget{}
	}
	return thinkBudget{limited: true, n: n, close: m.Tokenizer.Encode(reasoningClose(m.Template))}
}

// leaveRoomForAnswer gives a constrained request that thinks without a
// budget one — half of its room, at most the medium effort's budget — so the
// reasoning always ends and the constrained answer has tokens left to be
// written in; an unbounded reasoning would otherwise spend the whole room
// and return no answer at all.
func (p *genParams) leaveRoomForAnswer(m *Model) {
	if p.constraint == nil || !p.parse.StartInReasoning || p.think.limited {
		return
	}
	p.think = newThinkBudget(m, min(p.maxNew/2, openai.ReasoningBudgets["medium"]), true)
}
