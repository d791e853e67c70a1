package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/llm"
)

// reserve reserves a model call's estimated cost, the request's tokens
// (counted with the tokenizer) and its largest answer, in tokens and at
// the loop's model's price, against the loop's daily budgets; a call that
// would pass one is not made (services.CodeBudgetExceeded).
func (s *Service) reserve(ctx context.Context, l loopSpec, req llm.Request) (services.BudgetHold, int, error) {
	if s.opts.Budgets == nil {
		return services.BudgetHold{}, 0, nil
	}
	prompt := s.requestTokens(req)
	hold, err := s.opts.Budgets.Reserve(ctx, services.BudgetCall{Kind: l.e.pol.budget, Model: l.provider.Model(), PromptTokens: prompt, MaxOutput: s.maxOutput(req)})
	return hold, prompt, err
}

// settleBudget replaces the reservation by the call's reported usage
// (estimated from the request and the answer when the provider reports
// none; nothing for a call that failed).
func (s *Service) settleBudget(ctx context.Context, hold services.BudgetHold, prompt int, resp *llm.Response) {
	if s.opts.Budgets == nil || hold.Day == "" {
		return
	}
	var used services.TokenUsage
	if resp != nil {
		used = resp.Usage
		if used.PromptTokens+used.CompletionTokens == 0 {
			used = services.TokenUsage{PromptTokens: prompt, CompletionTokens: s.opts.Tokenizer.Count(resp.Text)}
		}
	}
	s.opts.Budgets.Settle(ctx, hold, used)
}

// maxOutput is the most a call may answer: the request's bound, or the
// output reserve the prompt keeps free.
func (s *Service) maxOutput(req llm.Request) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	return s.opts.Context.Window() - s.opts.Context.Budget()
}

// requestTokens estimates a request's prompt tokens.
func (s *Service) requestTokens(req llm.Request) int {
	tok := s.opts.Tokenizer
	n := tok.Count(req.System) + tok.Count(req.SystemContext)
	for _, t := range req.Tools {
		n += tok.Count(t.Name) + tok.Count(t.Description) + tok.Count(string(t.Parameters)) + 8
	}
	for _, m := range req.Messages {
		n += tok.Count(m.Content) + 4
		for _, c := range m.ToolCalls {
			n += tok.Count(c.Name) + tok.Count(string(c.Arguments)) + 4
		}
		n += 800 * len(m.Images)
	}
	return n
}

// cmdBudget answers /budget: each kind's spend today against its budget,
// and the last 7 days.
func (s *Service) cmdBudget(ctx context.Context) (string, error) {
	if s.opts.Budgets == nil {
		return "Budgets are not available on this server.", nil
	}
	r, err := s.opts.Budgets.Report(ctx)
	if err != nil {
		return "", err
	}
	return r.Text(), nil
}

// budgetNotice is the owner's notice of a run a budget ended.
func budgetNotice(err error) string {
	msg := services.ErrorMessage(err)
	return fmt.Sprintf("I stopped before the next model call: %s. /budget shows the spend.", strings.TrimSuffix(msg, "."))
}
