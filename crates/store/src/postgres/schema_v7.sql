-- Schema version 7: whom an address's failed logins were for. A successful login clears the
-- address's failures only when every one was for the user who logged in (OnlyUser, the folded
-- name tried; NULL once they were for several users, or a browser token that names none), so
-- a known account logged in between guesses at another never wipes the guesses.

ALTER TABLE LoginFailures ADD COLUMN OnlyUser TEXT NULL;
