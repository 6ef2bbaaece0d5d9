package checkpoint

import (
	"encoding/json"
	"os"
	"testing"
	"testing/fstest"
)

// TestOpenFS opens a checkpoint held in an fs.FS, as an embedded model is.
func TestOpenFS(t *testing.T) {
	cfg, err := json.Marshal(map[string]any{"text_config": testTextConfig(), "quantization": testQuantBlock()})
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{
		"tiny/config.json":            {Data: cfg},
		"tiny/generation_config.json": {Data: []byte(`{"eos_token_id": [1, 2], "temperature": 0.7}`)},
		"tiny/model.safetensors":      {Data: encodeSafetensors(routerTensors())},
	}
	c, err := OpenFS(fsys, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Names()) != len(routerTensors()) || c.Generation.Temperature != 0.7 || c.Config.HiddenSize != 64 {
		t.Errorf("names %v, generation %+v, hidden %d", c.Names(), c.Generation, c.Config.HiddenSize)
	}
	if _, err := c.TakeQuant("model.layers.1.mlp.gate", 0, 4, 64); err != nil {
		t.Error(err)
	}

	delete(fsys, "tiny/model.safetensors")
	_, err = OpenFS(fsys, "tiny")
	wantErr(t, err, "tiny", singleFile)
}

// TestOpenFSOracle reads the oracle through os.DirFS and compares with the mapped Open.
func TestOpenFSOracle(t *testing.T) {
	mapped, _ := openOracle(t)
	c, err := OpenFS(os.DirFS(oracleDir), ".")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, b := mapped.Stats(), c.Stats()
	if a.Params != b.Params || a.Tensors != b.Tensors || a.BytesByDType[U32] != b.BytesByDType[U32] {
		t.Errorf("stats differ: mapped %+v, fs %+v", a, b)
	}
}
