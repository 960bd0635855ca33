package openai

import "fmt"

// ReasoningBudgets are the thinking budgets, in tokens of reasoning, that
// reasoning_effort (reasoning.effort in the Responses API) stands for.
// "none" turns thinking off instead; without an effort or a budget the
// reasoning is bounded only by max_tokens and the context.
var ReasoningBudgets = map[string]int{
	"minimal": 256,
	"low":     1024,
	"medium":  4096,
	"high":    16384,
}

// MaxThinkingBudget bounds an explicit thinking_budget: no context holds
// more.
const MaxThinkingBudget = 1 << 20

// thinkingBudget is the budget a request sets: its explicit
// thinking_budget, else its reasoning effort's; limited is false when
// neither bounds the reasoning.
func thinkingBudget(explicit *int, effort string) (n int, limited bool) {
	if explicit != nil {
		return *explicit, true
	}
	n, limited = ReasoningBudgets[effort]
	return n, limited
}

// validateThinkingBudget checks an explicit thinking_budget.
func validateThinkingBudget(n *int, path string) *Error {
	if n != nil && (*n < 0 || *n > MaxThinkingBudget) {
		return InvalidRequest(path, fmt.Sprintf("'%s' must be between 0 and %d reasoning tokens, got %d.", path, MaxThinkingBudget, *n))
	}
	return nil
}

// ThinkingBudget returns the chat request's thinking budget: thinking_budget,
// else the budget of reasoning_effort (ReasoningBudgets); limited is false
// when neither bounds the reasoning.
func (r *ChatRequest) ThinkingBudget() (n int, limited bool) {
	effort := ""
	if r.ReasoningEffort != nil {
		effort = *r.ReasoningEffort
	}
	return thinkingBudget(r.MaxThinkingTokens, effort)
}

// ThinkingBudget returns the Responses request's thinking budget:
// thinking_budget, else the budget of reasoning.effort.
func (r *ResponsesRequest) ThinkingBudget() (n int, limited bool) {
	effort := ""
	if r.Reasoning != nil {
		effort = r.Reasoning.Effort
	}
	return thinkingBudget(r.MaxThinkingTokens, effort)
}
