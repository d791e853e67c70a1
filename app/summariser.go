package app

import (
	"context"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
)

// budgetedSummariser is the summary model as compaction calls it: each
// call is reserved against the daily budget of the kind whose history it
// summarises (services.BudgetKindOf, the main conversation by default)
// before it is made, and settled to its usage after, like a run's model
// calls; one that would pass the budget is not made (BUDGET_EXCEEDED).
type budgetedSummariser struct {
	llm.Provider
	a *App
}

func (p budgetedSummariser) Complete(ctx context.Context, req llm.Request, onDelta func(string)) (*llm.Response, error) {
	b, tok := p.a.budgets, p.a.tokenizer
	if b == nil {
		return p.Provider.Complete(ctx, req, onDelta)
	}
	prompt := req.EstimateTokens(tok.Count)
	hold, err := b.Reserve(ctx, services.BudgetCall{Kind: services.BudgetKindOf(ctx), Model: p.Model(), PromptTokens: prompt, MaxOutput: req.MaxTokens})
	if err != nil {
		return nil, err
	}
	resp, err := p.Provider.Complete(ctx, req, onDelta)
	var used services.TokenUsage
	if resp != nil {
		used = resp.Usage
		if used.PromptTokens+used.CompletionTokens == 0 {
			used = services.TokenUsage{PromptTokens: prompt, CompletionTokens: tok.Count(resp.Text)}
		}
	}
	b.Settle(context.WithoutCancel(ctx), hold, used)
	return resp, err
}
