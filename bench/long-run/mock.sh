# Sourced by bench scripts: the long-run workload's mock and keel's configuration for it.
# Needs MOCK (the keel-mockllm binary).

# start_mock DIR WORKLOAD [FLAGS...]: starts the mock, its log in DIR/mock.out; sets
# MOCK_PID and MOCK_PORT, or returns 1 when it did not start.
start_mock() {
  local dir=$1 workload=$2; shift 2
  "$MOCK" --workload "$workload" "$@" >"$dir/mock.out" 2>&1 &
  MOCK_PID=$! MOCK_PORT=""
  for _ in $(seq 200); do
    MOCK_PORT=$(grep -o '127\.0\.0\.1:[0-9]*' "$dir/mock.out" 2>/dev/null | cut -d: -f2 || true)
    [[ -n $MOCK_PORT ]] && return 0
    sleep 0.01
  done
  kill "$MOCK_PID" 2>/dev/null
  return 1
}

# keel_config HOME PORT: keel's configuration for the mock on PORT, in HOME/config.yaml.
keel_config() {
  cat >"$1/config.yaml" <<YAML
model: mock/mock-model
providers:
  mock:
    api: openai-completions
    base_url: http://127.0.0.1:$2/v1
    models:
      mock-model: {context_window: 1000000, max_output: 16384}
YAML
}
