package rows

// minStepTokens is the fewest tokens a step of a trajectory takes under any tokenizer: its six
// special tokens (docs/grammar.md: <|frame_sep|>, the state's three separators, <|action_sep|> and
// the action), each one token id.
const minStepTokens = 6

// maxSteps is the most steps a trajectory that fits in maxTokens can have: one with more has more
// than maxTokens tokens whatever its text.
func maxSteps(maxTokens int) int { return maxTokens/minStepTokens + 1 }
