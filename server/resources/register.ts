// Loads every family's behaviours and extra routes (import for side effects).
import './accounts.js';
import './certificates.js';
import './events.js';
import './families.js';
import './edges.js';
import './edge-ports.js';
import '../extensions/stack-locks.js';
import '../extensions/fingerprints.js';
import '../extensions/stack-kinds.js';
import '../extensions/batch.js';
import '../gateway/read-forms.js';
import './endpoints.js';
