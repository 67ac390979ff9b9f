//! Who calls a tool: a chat turn, a client of the framed protocol, an MCP session or a
//! solution script. Tools that only read need not know; a proposal records it, so an operator
//! sees where it came from and the chat turn after it is told what became of it.

use std::sync::Arc;

use uuid::Uuid;

/// The caller of one tool call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ToolCaller {
    /// The model, in a chat turn of a client connection.
    ChatTurn {
        /// The connection's server-made GUID (the transcript key).
        connection: Uuid,
        /// The user logged in on it.
        user: Arc<str>,
        /// The turn's number on that connection, from 1.
        turn: u64,
    },
    /// A client of the framed protocol calling the tool itself (CallTool).
    Client {
        /// The connection's server-made GUID.
        connection: Uuid,
        /// The user logged in on it.
        user: Arc<str>,
    },
    /// An external AI client over RuntimeMCP.
    Mcp {
        /// The MCP session's id.
        session: Arc<str>,
        /// The user its token acts as.
        user: Arc<str>,
        /// The name the client gave itself (`clientInfo.name`).
        client: Arc<str>,
    },
    /// A solution script.
    Script {
        /// The script's name.
        script: Arc<str>,
    },
}

impl ToolCaller {
    /// The client connection the call came on, for the callers that have one.
    pub fn connection(&self) -> Option<Uuid> {
        match self {
            Self::ChatTurn { connection, .. } | Self::Client { connection, .. } => Some(*connection),
            Self::Mcp { .. } | Self::Script { .. } => None,
        }
    }

    /// Where calls that belong together come from, as a key: one connection, one MCP session,
    /// one script.
    pub fn origin(&self) -> String {
        match self {
            Self::ChatTurn { connection, .. } | Self::Client { connection, .. } => {
                format!("connection:{connection}")
            }
            Self::Mcp { session, .. } => format!("mcp:{session}"),
            Self::Script { script } => format!("script:{script}"),
        }
    }

    /// The caller in words, for operators: `the assistant (turn 3, asked by alice)`.
    pub fn describe(&self) -> String {
        match self {
            Self::ChatTurn { user, turn, .. } => format!("the assistant (turn {turn}, asked by {user})"),
            Self::Client { user, .. } => format!("a client ({user})"),
            Self::Mcp { user, client, .. } => format!("MCP client {client} ({user})"),
            Self::Script { script } => format!("script {script}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_say_where_they_come_from() {
        let connection = Uuid::from_u128(7);
        let turn = ToolCaller::ChatTurn {
            connection,
            user: "alice".into(),
            turn: 3,
        };
        assert_eq!(turn.describe(), "the assistant (turn 3, asked by alice)");
        assert_eq!(turn.connection(), Some(connection));
        let client = ToolCaller::Client {
            connection,
            user: "alice".into(),
        };
        assert_eq!(turn.origin(), client.origin(), "one connection, one origin");
        let mcp = ToolCaller::Mcp {
            session: "s1".into(),
            user: "bob".into(),
            client: "Claude".into(),
        };
        assert_eq!(
            (mcp.describe().as_str(), mcp.connection()),
            ("MCP client Claude (bob)", None)
        );
        let script = ToolCaller::Script {
            script: "Tick".into(),
        };
        assert_eq!(
            (script.describe().as_str(), script.origin().as_str()),
            ("script Tick", "script:Tick")
        );
    }
}
