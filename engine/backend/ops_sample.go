package backend

// Sample chooses the next token from a row of logits, on the device, so a
// decode step needs no logits on the host: the chosen id goes into Token
// (the next step's input) and, with the non-finite flag, into Status (the
// 8 bytes the host reads). Specified in float32; engine/sample Kernel is
// the definition (backendtest.Sample its plain restatement):
//
//  1. Penalties on a copy x of Logits: for a token with Counts > 0 or
//     InPrompt != 0, x = x/rep when x > 0, else x*rep (rep > 0 and != 1);
//     then for Counts = n > 0, x -= presence + frequency*n.
//  2. Status[1] = 1 when any raw logit is NaN or infinite (else 0); then
//     and at temperature <= 0 the choice is greedy: the largest x, NaN
//     below every number, the lower id on ties.
//  3. Weights w = exp(-(m-x)/T), m the largest x, T the temperature; w = 0
//     where (m-x)/T >= 87.
//  4. Top-k (k > 0 and < Vocab) keeps the k first tokens in the order (x
//     descending, id ascending); top-p (0 < p < 1) keeps the shortest
//     prefix of those in that order whose summed weight reaches p times
//     their total; min-p keeps tokens with w >= min-p, and the best token.
//  5. u = Uniform(seed, draw) (engine/sample: splitmix64, 24 bits); the
//     chosen id is the first kept token in id order where the running sum
//     of kept weights exceeds u times their total (the last kept token
//     with w > 0 if rounding leaves none).
//  6. Counts[id] += 1 and Config[SampleDraw] += 1.
//
// A device may round exp, the sums and the boundary masses differently by
// a few float32 units: it must choose the same id except where a boundary
// (the top-p mass, u times the total) falls within that rounding of a
// partial sum. Greedy choices are exact.
type Sample struct {
	Labeled
	Logits   Buffer // f32 [Vocab], read only
	Params   Buffer // f32 [SampleParamCount]
	Config   Buffer // i32 [SampleConfigCount]
	Counts   Buffer // i32 [Vocab]: generated occurrences
	InPrompt Buffer // i32 [Vocab]: nonzero for tokens in the prompt
	Token    Buffer // i32 [1] out: the chosen id
	Status   Buffer // i32 [2] out: the chosen id, and 1 when a logit was not finite
	Vocab    int
}

// The values of Sample.Params, in order.
const (
	SampleTemperature = iota
	SampleTopP
	SampleMinP
	SamplePresence
	SampleFrequency
	SampleRepetition
	SampleParamCount
)

// The values of Sample.Config, in order: top-k (<= 0 off), the seed's low
// and high 32 bits, and the number of draws made so far.
const (
	SampleTopK = iota
	SampleSeedLow
	SampleSeedHigh
	SampleDraw
	SampleConfigCount
)

// Logprobs: the log-probabilities, under softmax of the raw Logits, of the
// token in Token (Out[0]) and of the TopN most likely tokens (logit
// descending, id ascending, NaN last): their ids in TopIDs, their values in
// Out[1:]. Float32: l - (m + log Σ exp(l-m)), the sum over the tokens
// within 87 of the largest logit m. Run after Sample when a request asks
// for log-probabilities.
type Logprobs struct {
	Labeled
	Logits Buffer // f32 [Vocab]
	Token  Buffer // i32 [1]
	Out    Buffer // f32 [1+TopN]
	TopIDs Buffer // i32 [TopN]; the zero Buffer when TopN is 0
	Vocab  int
	TopN   int
}

func (o *Sample) Name() string   { return "Sample" }
func (o *Logprobs) Name() string { return "Logprobs" }

func (o *Sample) Access() (r, w []Buffer) {
	return []Buffer{o.Logits, o.Params, o.Config, o.Counts, o.InPrompt},
		[]Buffer{o.Config, o.Counts, o.Token, o.Status}
}

func (o *Logprobs) Access() (r, w []Buffer) {
	if o.TopN == 0 {
		return []Buffer{o.Logits, o.Token}, []Buffer{o.Out}
	}
	return []Buffer{o.Logits, o.Token}, []Buffer{o.Out, o.TopIDs}
}

// Asynchronous is implemented by a backend whose Run returns before the
// work is done (a GPU's): the decode loop then issues the next step before
// reading the last chosen id. A backend without it runs each step to the
// end inside Run, where issuing ahead gains nothing.
type Asynchronous interface {
	Asynchronous() bool
}
