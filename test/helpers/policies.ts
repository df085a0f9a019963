// Traffic-policy documents shared by the engine's tests.

/** The 13.6 typos: an unknown action type, capacity 0 and an expression naming no variable. */
export const TYPO_POLICY = `on_http_request:
  - name: limit
    expressions:
      - "req.pth.startsWith('/api')"
    actions:
      - type: rate-limt
        config:
          name: api
          algorithm: sliding_window
          capacity: 0
          rate: 60s
          bucket_key: [req.host]
  - name: real
    actions:
      - type: rate-limit
        config:
          name: api
          algorithm: sliding_window
          capacity: 0
          rate: 60s
          bucket_key: [req.host]
`;
