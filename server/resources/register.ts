// Loads every family's behaviours and extra routes (import for side effects).
import './accounts.js';
import './events.js';
import './families.js';
