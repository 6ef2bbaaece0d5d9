package checkpoint

import (
	"encoding/json"
	"fmt"
)

// Generation holds generation_config.json's sampling defaults and stop ids.
// Fields are zero and the Has flags false when the file or a key is absent.
type Generation struct {
	EOSTokenIDs []int

	Temperature, TopP, MinP float64
	TopK                    int
	RepetitionPenalty       float64
	PresencePenalty         float64
	DoSample                bool

	HasTemperature, HasTopP, HasTopK, HasMinP bool
	HasRepetitionPenalty, HasPresencePenalty  bool
	HasDoSample                               bool
}

type generationFields struct {
	EOSTokenID        json.RawMessage `json:"eos_token_id"`
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	TopK              *int            `json:"top_k"`
	MinP              *float64        `json:"min_p"`
	RepetitionPenalty *float64        `json:"repetition_penalty"`
	PresencePenalty   *float64        `json:"presence_penalty"`
	DoSample          *bool           `json:"do_sample"`
}

// parseGeneration reads generation_config.json's bytes.
func parseGeneration(data []byte) (Generation, error) {
	var f generationFields
	if err := json.Unmarshal(data, &f); err != nil {
		return Generation{}, fmt.Errorf("checkpoint: generation_config.json: %s", describeJSONError("", err))
	}
	var g Generation
	var err error
	if g.EOSTokenIDs, err = parseTokenIDs(f.EOSTokenID); err != nil {
		return Generation{}, fmt.Errorf("checkpoint: generation_config.json: eos_token_id: %v", err)
	}
	g.Temperature, g.HasTemperature = orDefault(f.Temperature, 0), f.Temperature != nil
	g.TopP, g.HasTopP = orDefault(f.TopP, 0), f.TopP != nil
	g.TopK, g.HasTopK = orDefault(f.TopK, 0), f.TopK != nil
	g.MinP, g.HasMinP = orDefault(f.MinP, 0), f.MinP != nil
	g.RepetitionPenalty, g.HasRepetitionPenalty = orDefault(f.RepetitionPenalty, 0), f.RepetitionPenalty != nil
	g.PresencePenalty, g.HasPresencePenalty = orDefault(f.PresencePenalty, 0), f.PresencePenalty != nil
	g.DoSample, g.HasDoSample = orDefault(f.DoSample, false), f.DoSample != nil
	return g, nil
}
